"""Bounded exponential backoff with jitter for transient failures."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` tries in all; the wait after attempt ``n`` is drawn from
    ``[d/2, d]`` with ``d = min(max_delay, base_delay * 2**(n-1))`` ("equal jitter": never
    a hot loop, and replicas retrying together spread out)."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** max(attempt - 1, 0))
        draw = rng.random() if rng is not None else random.random()  # noqa: S311  # jitter
        return ceiling / 2 + draw * ceiling / 2

    def exhausted(self, attempt: int) -> bool:
        return attempt >= self.max_attempts
