"""Retention, ranking and fact deduplication for long-term memory (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llm_bot.memory.long_term import (
    EpisodicSummary,
    LongTermBundle,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
    Source,
    normalize_fact,
    stable_id,
)

BUNDLE_FACTS = 20
BUNDLE_EPISODES = 5
BUNDLE_EVENTS = 5
BUNDLE_PROFILE = 20
RESTATEMENT_SIMILARITY = 0.75
CONFIDENCE_BOOST = 0.1


@dataclass(frozen=True)
class RetentionPolicy:
    """At most ``max_items`` per kind; nothing older than ``max_age_days``."""

    max_items: int = 1000
    max_age_days: int = 365


Scored = SemanticFact | EpisodicSummary | NotableEvent


def score(item: Scored) -> float:
    """How much an item is worth keeping and showing."""
    if isinstance(item, SemanticFact):
        return item.salience * item.confidence
    if isinstance(item, NotableEvent):
        return item.importance
    return item.salience


def recorded(item: Scored) -> str:
    """When llm-bot stored the item, which retention counts from: a fact's last update, an
    episode's or event's ``recorded_at`` (its ``created_at`` for items stored before that
    field existed). Imported history of years ago is kept as long as live memory."""
    if isinstance(item, SemanticFact):
        return item.updated_at
    return item.recorded_at or item.created_at


def to_evict(items: Sequence[Scored], max_items: int, cutoff_iso: str) -> list[str]:
    """Ids to remove: everything recorded before the cutoff, then the least salient and
    oldest beyond ``max_items``."""
    expired = [item.id for item in items if recorded(item) < cutoff_iso]
    alive = [item for item in items if recorded(item) >= cutoff_iso]
    ranked = sorted(alive, key=lambda i: (-score(i), _newest_first(i.created_at), i.id))
    return expired + [item.id for item in ranked[max_items:]]


def _newest_first(created_at: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in created_at)


def select_bundle(
    *,
    profile: Sequence[ProfileAttribute],
    facts: Sequence[SemanticFact],
    episodes: Sequence[EpisodicSummary],
    events: Sequence[NotableEvent],
) -> LongTermBundle:
    """The selection ``recall`` loads: profile, best facts, latest episodes, most important
    recent events. Deterministic."""
    return LongTermBundle(
        profile=tuple(sorted(profile, key=lambda a: a.key)[:BUNDLE_PROFILE]),
        facts=tuple(sorted(facts, key=lambda f: (-score(f), f.id))[:BUNDLE_FACTS]),
        episodes=tuple(sorted(episodes, key=lambda e: (e.created_at, e.id))[-BUNDLE_EPISODES:]),
        events=tuple(
            sorted(events, key=lambda e: (-e.importance, _newest_first(e.created_at), e.id))[
                :BUNDLE_EVENTS
            ]
        ),
    )


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, kana, CJK): a
# space there separates phrases at the writer's whim, so words are no unit to compare.
_UNSPACED_SCRIPT = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff]"
)


def _tokens(text: str) -> set[str]:
    normalized = normalize_fact(text)
    words = set(normalized.split())
    if _UNSPACED_SCRIPT.search(normalized) or (len(words) <= 1 and len(normalized) > 3):
        compact = normalized.replace(" ", "")  # unspaced scripts (Thai): character bigrams
        return {compact[i : i + 2] for i in range(len(compact) - 1)} or words
    return words


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of word sets (character bigrams for unspaced text)."""
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def find_restated(existing: Sequence[SemanticFact], fact: str) -> SemanticFact | None:
    """The existing fact that ``fact`` restates, if any (same normalized text, or similar)."""
    target = normalize_fact(fact)
    best: tuple[float, SemanticFact] | None = None
    for item in existing:
        if normalize_fact(item.fact) == target:
            return item
        value = similarity(item.fact, fact)
        if value >= RESTATEMENT_SIMILARITY and (best is None or value > best[0]):
            best = (value, item)
    return best[1] if best else None


def remember_fact(
    existing: Sequence[SemanticFact],
    *,
    fact: str,
    tags: Sequence[str],
    confidence: float,
    salience: float,
    source: Source,
    now: str,
) -> SemanticFact:
    """A new fact, or the existing one it restates updated: same id, higher confidence,
    merged sources and tags."""
    match = find_restated(existing, fact)
    if match is None:
        return SemanticFact(
            id=stable_id("fact", normalize_fact(fact)),
            fact=fact.strip(),
            tags=tuple(sorted(set(tags))),
            confidence=confidence,
            salience=salience,
            sources=(source,),
            created_at=now,
            updated_at=now,
        )
    if source in match.sources:
        return match  # the same compaction again: nothing new
    top = max(match.confidence, confidence)
    return match.model_copy(
        update={
            # rounded for stable storage, never below what it was (rounding could lower it)
            "confidence": max(top, round(min(1.0, top + CONFIDENCE_BOOST * (1 - top)), 4)),
            "salience": max(match.salience, salience),
            "tags": tuple(sorted(set(match.tags) | set(tags))),
            "sources": (*match.sources, source),
            "updated_at": now,
        }
    )
