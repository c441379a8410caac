"""Sweeps work until nothing is due, bounded by time per tick, not by a count (issue 24).

``drain_due`` asks for what is due in growing batches and handles each item at most once
per sweep: an item still due after it was handled (its handling failed: Redis or the broker
down) is skipped until the next sweep, and never starves the items behind it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

SWEEP_BATCH = 100
SWEEP_BUDGET_SECONDS = 10.0


async def drain_due(
    due: Callable[[int], Awaitable[Sequence[T]]],
    handle: Callable[[T], Awaitable[None]],
    *,
    budget_seconds: float = SWEEP_BUDGET_SECONDS,
    batch: int = SWEEP_BATCH,
) -> int:
    """Handle everything ``due(limit)`` returns until a batch brings nothing new or the
    time budget is spent; returns how many items were handled."""
    seen: set[T] = set()
    deadline = time.monotonic() + budget_seconds
    while True:
        found = await due(batch + len(seen))
        fresh = [item for item in found if item not in seen]
        for item in fresh:
            seen.add(item)
            await handle(item)
        if not fresh or len(found) < batch + len(seen) - len(fresh):
            return len(seen)
        if time.monotonic() >= deadline:
            return len(seen)
