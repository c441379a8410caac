"""Retention and ranking of long-term memory, and the recall bundle (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llm_bot.memory.long_term import (
    EpisodicSummary,
    LongTermBundle,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
)

BUNDLE_FACTS = 20
BUNDLE_EPISODES = 5
BUNDLE_EVENTS = 5
BUNDLE_PROFILE = 20


@dataclass(frozen=True)
class RetentionPolicy:
    """At most ``max_items`` per kind; nothing older than ``max_age_days``."""

    max_items: int = 1000
    max_age_days: int = 365


Scored = SemanticFact | EpisodicSummary | NotableEvent


def score(item: Scored) -> float:
    """How much an item is worth keeping and showing (nothing for a superseded fact: it is
    the first to go)."""
    if isinstance(item, SemanticFact):
        return item.salience * item.confidence if item.superseded_by is None else 0.0
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
    """The selection ``recall`` loads: profile, best current facts, latest episodes, most
    important recent events. Deterministic."""
    facts = [fact for fact in facts if fact.superseded_by is None]
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
