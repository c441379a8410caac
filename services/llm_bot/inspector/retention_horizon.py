"""A user's retention horizon per kind, as dates, from the policy the worker applies
(``memory/retention.py``, ``plan_retention``): items recorded before ``kept_since`` are gone
at the user's next retention pass; the oldest item still held goes on ``next_goes``; at
most ``max_items`` per kind (profile: no count limit) are kept. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from llm_bot.memory.long_term import EpisodicSummary, NotableEvent, ProfileAttribute, SemanticFact
from llm_bot.memory.retention import RetentionPolicy, recorded


def _when(iso: str) -> datetime:
    value = datetime.fromisoformat(iso)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _horizon(
    kind: str, days: int, max_items: int | None, held: Sequence[str], now: datetime
) -> dict[str, Any]:
    oldest = min((_when(at) for at in held), default=None)
    return {
        "kind": kind,
        "max_age_days": days,
        "max_items": max_items,
        "kept_since": (now - timedelta(days=days)).date().isoformat(),
        "held": len(held),
        "next_goes": (oldest + timedelta(days=days)).date().isoformat() if oldest else None,
    }


def retention_horizon(
    policy: RetentionPolicy,
    *,
    now: datetime,
    profile: Sequence[ProfileAttribute],
    facts: Sequence[SemanticFact],
    episodes: Sequence[EpisodicSummary],
    events: Sequence[NotableEvent],
) -> list[dict[str, Any]]:
    """One row per kind: its limits, the date before which nothing is kept, how many items
    the user has and when the oldest of them goes."""
    days, most = policy.max_age_days, policy.max_items
    return [
        _horizon(
            "profile", policy.profile_max_age_days, None, [a.updated_at for a in profile], now
        ),
        _horizon("facts", days, most, [recorded(f) for f in facts], now),
        _horizon("episodes", days, most, [recorded(e) for e in episodes], now),
        _horizon("events", days, most, [recorded(e) for e in events], now),
    ]
