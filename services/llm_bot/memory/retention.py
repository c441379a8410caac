"""Retention and ranking of long-term memory, and the recall bundle (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from llm_bot.memory.long_term import (
    EpisodicSummary,
    LongTermBundle,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
)
from llm_bot.memory.stale_statements import still_true

BUNDLE_FACTS = 20
BUNDLE_EPISODES = 5
BUNDLE_EVENTS = 5
BUNDLE_PROFILE = 20


@dataclass(frozen=True)
class RetentionPolicy:
    """At most ``max_items`` per kind; no fact, episode or event older than
    ``max_age_days``, no profile attribute older than ``profile_max_age_days`` (counted
    from the last time it was set)."""

    max_items: int = 1000
    max_age_days: int = 365
    profile_max_age_days: int = 365

    @property
    def longest_days(self) -> int:
        return max(self.max_age_days, self.profile_max_age_days)


@dataclass(frozen=True)
class RetentionPlan:
    """What retention does to one user's long-term memory now."""

    evicted: dict[str, list[str]]
    """Kind → ids (profile: keys) to delete."""
    bundle: LongTermBundle
    """The selection of what stays."""
    next_due: datetime | None
    """When the next item ages out (None: nothing left to age)."""

    def count(self) -> int:
        return sum(len(ids) for ids in self.evicted.values())


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
    important recent events; never a superseded fact, nor an episode or event that states
    what a correction replaced (``stale_statements``). Deterministic."""
    episodes, events = still_true(facts, episodes, events)
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


def plan_retention(
    policy: RetentionPolicy,
    *,
    now: datetime,
    profile: Sequence[ProfileAttribute],
    facts: Sequence[SemanticFact],
    episodes: Sequence[EpisodicSummary],
    events: Sequence[NotableEvent],
) -> RetentionPlan:
    """Evict past the age limits and beyond ``max_items`` per kind; the bundle of what
    stays and when the oldest survivor will age out."""
    age = timedelta(days=policy.max_age_days)
    profile_age = timedelta(days=policy.profile_max_age_days)
    cutoff = (now - age).isoformat()
    evicted = {
        "profile": [a.key for a in profile if _when(a.updated_at) < now - profile_age],
        "facts": to_evict(facts, policy.max_items, cutoff),
        "episodes": to_evict(episodes, policy.max_items, cutoff),
        "events": to_evict(events, policy.max_items, cutoff),
    }
    gone = {kind: set(ids) for kind, ids in evicted.items()}
    kept_profile = [a for a in profile if a.key not in gone["profile"]]
    kept_facts = [f for f in facts if f.id not in gone["facts"]]
    kept_episodes = [e for e in episodes if e.id not in gone["episodes"]]
    kept_events = [e for e in events if e.id not in gone["events"]]
    expiries = [_when(a.updated_at) + profile_age for a in kept_profile]
    survivors: list[Scored] = [*kept_facts, *kept_episodes, *kept_events]
    expiries += [_when(recorded(item)) + age for item in survivors]
    return RetentionPlan(
        evicted={kind: ids for kind, ids in evicted.items() if ids},
        bundle=select_bundle(
            profile=kept_profile, facts=kept_facts, episodes=kept_episodes, events=kept_events
        ),
        next_due=min(expiries, default=None),
    )


def _when(iso: str) -> datetime:
    """An item's ISO timestamp as an aware datetime (naive ones are UTC)."""
    value = datetime.fromisoformat(iso)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
