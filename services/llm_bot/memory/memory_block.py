"""The memory block (SPEC 5.3): long-term items and the rolling summary, as a JSON document.

The document has only the sections that have content, in this order, one item per line
(:func:`~llm_bot.memory.memory_message.quote_json`); the memory message quotes it::

    {
    "profile": [
    "preferred_language: th"
    ],
    "facts": [
    "Prefers delivery on weekends."
    ],
    "summary": "Earlier in this conversation: ...",
    "episodes": [
    "2025-07-29: Asked about the price of the blue kettle; was told 250 THB.",
    "2025-07-30: (COMPLAINT) The kettle arrived broken."
    ],
    "recalled": [
    "(2023-05-08 Mon, Caroline) I went to the LGBTQ support group yesterday."
    ]
    }

``recalled`` holds what retrieval found relevant to the current message (SPEC 5.7), each
item with its date and speaker (either left out when unknown). The sections go from the
slowest-changing to the fastest, as measured by ``tests/bench/token_cost.py`` (profile and
facts change a handful of times in 1,000 turns; the summary at each compaction; episodes at
each compaction and with each notable event; recalled items at nearly every search), so
that what precedes a change stays a byte-stable prefix for provider prompt caching.

Ordering: profile attributes by key; semantic facts by descending ``salience * confidence``,
then id; episodic summaries and notable events merged, oldest first by ``created_at`` (ISO
strings, compared as written) then id; recalled items chronologically (date, then
their place in the conversation, then id), those the previous turn recalled too
(``carried``) first: a search that keeps most of the last selection then changes the
section's end, not its start. The date is the first ten characters of ``created_at``.

Stored text is data, never structure: every text is sanitised
(:func:`~llm_bot.memory.stored_text.sanitize`: NFKC, no invisible or bidi characters, one
line) and then encoded as a JSON string. Items whose text is blank after sanitising have
nothing to show and are left out.

Everything here is pure and deterministic: identical input renders byte-identical output.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.memory_message import quote_json
from llm_bot.memory.stored_text import sanitize
from llm_bot.memory.topic import RecalledRecord

WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

ItemKind = Literal["profile", "facts", "episodes", "events", "recalled"]
MemoryDocument = dict[str, list[str] | str]
"""Section name → its items (``summary``: one text)."""


@dataclass(frozen=True)
class MemoryItem:
    """One renderable long-term item: its sanitised line body and what ranks it.

    ``uid`` is unique within one :class:`MemoryItems`; ``score`` is ``salience *
    confidence`` for facts, ``importance`` for events, ``salience`` for episodes and the
    retrieval's relevance for recalled items.
    """

    uid: int
    kind: ItemKind
    text: str
    score: float
    created_at: str
    id: str


@dataclass(frozen=True)
class MemoryItems:
    """Everything the block can show, each section in rendering order."""

    profile: tuple[MemoryItem, ...]
    facts: tuple[MemoryItem, ...]
    episodic: tuple[MemoryItem, ...]
    """Episodic summaries and notable events, merged, oldest first."""
    summary: str
    recalled: tuple[MemoryItem, ...] = ()
    """Retrieved for the current message, chronological."""

    @property
    def events(self) -> tuple[MemoryItem, ...]:
        return tuple(item for item in self.episodic if item.kind == "events")

    @property
    def episodes(self) -> tuple[MemoryItem, ...]:
        return tuple(item for item in self.episodic if item.kind == "episodes")


def collect_items(
    bundle: LongTermBundle,
    summary: str,
    recalled: Sequence[RecalledRecord] = (),
    carried: Collection[str] = (),
) -> MemoryItems:
    """The bundle's and the recalled items, sanitised and ordered for rendering; blank ones
    left out. ``carried``: ids of the items the previous turn recalled (rendered first)."""
    uids = iter(range(bundle.item_count() + len(recalled)))
    profile: list[MemoryItem] = []
    for attr in bundle.profile:
        key, value = sanitize(attr.key), sanitize(attr.value)
        if key and value:
            text = f"{key}: {value}"
            profile.append(MemoryItem(next(uids), "profile", text, 0.0, attr.updated_at, key))
    facts: list[MemoryItem] = []
    for fact in bundle.facts:
        text = sanitize(fact.fact)
        if text:
            score = fact.salience * fact.confidence
            facts.append(MemoryItem(next(uids), "facts", text, score, fact.created_at, fact.id))
    episodic: list[MemoryItem] = []
    for episode in bundle.episodes:
        text = sanitize(episode.summary)
        if text:
            text = f"{_date(episode.created_at)}: {text}"
            episodic.append(
                MemoryItem(
                    next(uids), "episodes", text, episode.salience, episode.created_at, episode.id
                )
            )
    for event in bundle.events:
        line = " ".join(filter(None, (f"({event.event_type})", sanitize(event.summary))))
        text = f"{_date(event.created_at)}: {line}"
        episodic.append(
            MemoryItem(next(uids), "events", text, event.importance, event.created_at, event.id)
        )
    found: list[tuple[tuple[bool, str, int, int, str], MemoryItem]] = []
    for record in recalled:
        line = recalled_line(record.text, record.date, record.speaker)
        if line:
            item = MemoryItem(next(uids), "recalled", line, record.score, record.date, record.id)
            new = record.id not in carried
            found.append(((new, record.date, record.turn, record.seq, record.id), item))
    return MemoryItems(
        profile=tuple(sorted(profile, key=lambda i: (i.id, i.text))),
        facts=tuple(sorted(facts, key=lambda i: (-i.score, i.id, i.text))),
        episodic=tuple(sorted(episodic, key=lambda i: (i.created_at, i.id, i.kind, i.text))),
        summary=sanitize(summary),
        recalled=tuple(item for _, item in sorted(found, key=lambda pair: pair[0])),
    )


def memory_document(
    items: MemoryItems, *, omit: Collection[int] = (), summary: str | None = None
) -> MemoryDocument:
    """The sections for ``items`` without the items whose uid is in ``omit``, and with
    ``summary`` (default: ``items.summary``) as the summary; only sections with content."""
    shown_summary = items.summary if summary is None else summary
    sections: dict[str, list[str] | str] = {
        "profile": [i.text for i in items.profile if i.uid not in omit],
        "facts": [i.text for i in items.facts if i.uid not in omit],
        "summary": shown_summary,
        "episodes": [i.text for i in items.episodic if i.uid not in omit],
        "recalled": [i.text for i in items.recalled if i.uid not in omit],
    }
    return {name: body for name, body in sections.items() if body}


def render_items(
    items: MemoryItems, *, omit: Collection[int] = (), summary: str | None = None
) -> str:
    """The block (:func:`memory_document` as quoted JSON); "" when it would be empty."""
    document = memory_document(items, omit=omit, summary=summary)
    return quote_json(document) if document else ""


def render_memory_block(*, bundle: LongTermBundle, summary: str) -> str:
    """The whole memory block for ``bundle`` and ``summary``; "" when there is nothing."""
    return render_items(collect_items(bundle, summary))


def _date(created_at: str) -> str:
    return sanitize(created_at)[:10]


def _date_and_weekday(created_at: str) -> str:
    day = _date(created_at)
    try:
        return f"{day} {WEEKDAY_NAMES[datetime.date.fromisoformat(day).weekday()]}"
    except ValueError:
        return day


def recalled_line(text: str, date: str, speaker: str) -> str:
    """A recalled item as the prompt shows it: ``(<date> <weekday>, <speaker>) <text>``,
    sanitised ("" when the text is blank). The weekday lets the model resolve what the
    text says relative to its day ("last Friday", "yesterday")."""
    shown = sanitize(text)
    if not shown:
        return ""
    label = ", ".join(filter(None, (_date_and_weekday(date), sanitize(speaker))))
    return f"({label}) {shown}" if label else shown


__all__ = [
    "ItemKind",
    "MemoryDocument",
    "MemoryItem",
    "MemoryItems",
    "collect_items",
    "memory_document",
    "recalled_line",
    "render_items",
    "render_memory_block",
    "sanitize",
]
