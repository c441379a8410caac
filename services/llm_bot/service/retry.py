"""Bounded exponential backoff with jitter for transient failures."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from llm_bot.errors import RetryableError

T = TypeVar("T")


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


@dataclass(frozen=True)
class Exhausted:
    """The last retryable error once ``max_attempts`` ran out."""

    error: RetryableError
    attempts: int


async def with_retries(
    action: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    attempt: int,
    on_retry: Callable[[int, RetryableError, float], None],
) -> T | Exhausted:
    """Run ``action`` until it succeeds, a permanent error escapes, or attempts run out.

    ``attempt`` is the number of the first try (later deliveries start later);
    ``on_retry(attempt, error, delay)`` is called before each backoff sleep.
    """
    while True:
        try:
            return await action()
        except RetryableError as exc:
            if policy.exhausted(attempt):
                return Exhausted(exc, attempt)
            delay = policy.delay(attempt)
            on_retry(attempt, exc, delay)
            await asyncio.sleep(delay)
            attempt += 1
