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
    "recalled": {
    "2023-05-08 Mon": [
    "Caroline: I went to the LGBTQ support group yesterday.",
    "Melanie: That's great!"
    ]
    }
    }

``recalled`` holds what retrieval found relevant to the current message (SPEC 5.7), one
line per item, ``<speaker>: <text>`` (the speaker left out when unknown), under its date
and weekday (``undated`` when the item has none). Grouped by date rather than each line
carrying its own "(2023-05-08 Mon, Caroline)", which costs ~10 tokens: a search usually
recalls several messages of one day (a session), so the same budget holds more of them
(LoCoMo, simulated, 2,000 tokens: 0.875 -> 0.891 of the evidence; docs/benchmarks-notebook.md).
The sections go from the
slowest-changing to the fastest, as measured by ``tests/bench/token_cost.py`` (profile and
facts change a handful of times in 1,000 turns; the summary at each compaction; episodes at
each compaction and with each notable event; recalled items at nearly every search), so
that what precedes a change stays a byte-stable prefix for provider prompt caching.

Ordering: profile attributes by key; semantic facts by descending ``salience * confidence``,
then id; episodic summaries and notable events merged, oldest first by ``created_at`` (ISO
strings, compared as written) then id; recalled items chronologically (date, then
their place in the conversation, then id), those the previous turn recalled too
(``carried``) first: a search that keeps most of the last selection then changes the
section's end, not its start; each date's group sits where its first item does. The date
is the first ten characters of ``created_at``.

Stored text is data, never structure: every text is sanitised
(:func:`~llm_bot.memory.stored_text.sanitize`: NFKC, no invisible or bidi characters, one
line) and then encoded as a JSON string. Items whose text is blank after sanitising have
nothing to show and are left out.

Everything here is pure and deterministic: identical input renders byte-identical output.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.memory_message import quote_json
from llm_bot.memory.recall_budget import UNDATED
from llm_bot.memory.stored_text import sanitize
from llm_bot.memory.topic_state import RecalledRecord

WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

ItemKind = Literal["profile", "facts", "episodes", "events", "recalled"]
MemoryDocument = dict[str, list[str] | str | dict[str, list[str]]]
"""Section name → its items (``summary``: one text; ``recalled``: date → its lines)."""


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
    group: str = ""
    """A recalled item's date and weekday (:func:`recalled_group`), under which it shows."""


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


RECALLED_LINES_CACHED = 16384
"""Recalled lines (and their date groups) kept once made: the same entries are recalled
turn after turn, ~160 of them per reply at the default budget (a few MB at most)."""


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
        line = recalled_line(record.text, record.speaker)
        if line:
            group = recalled_group(record.date)
            item = MemoryItem(
                next(uids), "recalled", line, record.score, record.date, record.id, group
            )
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
    sections: MemoryDocument = {
        "profile": [i.text for i in items.profile if i.uid not in omit],
        "facts": [i.text for i in items.facts if i.uid not in omit],
        "summary": shown_summary,
        "episodes": [i.text for i in items.episodic if i.uid not in omit],
        "recalled": by_group(i for i in items.recalled if i.uid not in omit),
    }
    return {name: body for name, body in sections.items() if body}


def by_group(recalled: Iterable[MemoryItem]) -> dict[str, list[str]]:
    """Recalled items' lines under their dates, each group where its first item is."""
    groups: dict[str, list[str]] = {}
    for item in recalled:
        groups.setdefault(item.group, []).append(item.text)
    return groups


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


@functools.lru_cache(maxsize=4096)
def _date_and_weekday(created_at: str) -> str:
    """The day of a timestamp and its weekday's name, remembered: the same recalled items'
    dates come back prompt after prompt (timestamps only, no user's words)."""
    day = _date(created_at)
    try:
        return f"{day} {WEEKDAY_NAMES[datetime.date.fromisoformat(day).weekday()]}"
    except ValueError:
        return day


@functools.lru_cache(maxsize=RECALLED_LINES_CACHED)
def recalled_line(text: str, speaker: str) -> str:
    """A recalled item's line: ``<speaker>: <text>``, sanitised ("" when the text is blank;
    the text alone when the speaker is unknown)."""
    shown = sanitize(text)
    if not shown:
        return ""
    name = sanitize(speaker)
    return f"{name}: {shown}" if name else shown


@functools.lru_cache(maxsize=RECALLED_LINES_CACHED)
def recalled_group(date: str) -> str:
    """The group a recalled item shows under: its date with the weekday, which lets the
    model resolve what the text says relative to its day ("last Friday", "yesterday")."""
    return _date_and_weekday(date) or UNDATED


__all__ = [
    "ItemKind",
    "MemoryDocument",
    "MemoryItem",
    "MemoryItems",
    "by_group",
    "collect_items",
    "memory_document",
    "recalled_group",
    "recalled_line",
    "render_items",
    "render_memory_block",
    "sanitize",
]
