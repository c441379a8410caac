"""Backoff policy and attempt counting."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from llm_bot.service.handler import Delivery, first_attempt
from llm_bot.service.retry import RetryPolicy


@given(attempt=st.integers(min_value=1, max_value=60), seed=st.integers())
def test_delay_stays_within_half_and_full_of_the_capped_exponential(
    attempt: int, seed: int
) -> None:
    """The wait after attempt n lies in [d/2, d], d = min(max, base * 2**(n-1))."""
    policy = RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=30.0)
    ceiling = min(30.0, 0.5 * 2 ** (attempt - 1))
    delay = policy.delay(attempt, random.Random(seed))
    assert ceiling / 2 <= delay <= ceiling


def test_delays_grow_then_cap() -> None:
    """Successive ceilings double until the maximum; jitter spreads equal attempts."""
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(7)
    assert [round(max(policy.delay(n, rng) for _ in range(200))) for n in range(1, 7)] == [
        1,
        2,
        4,
        8,
        8,
        8,
    ]
    draws = {policy.delay(3, rng) for _ in range(20)}
    assert len(draws) == 20


def test_exhausted_after_max_attempts() -> None:
    """Attempt numbers at or past max_attempts are the last ones."""
    policy = RetryPolicy(max_attempts=3)
    assert [policy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]


def test_first_attempt_counts_earlier_deliveries() -> None:
    """x-delivery-count (quorum queues) makes a redelivery's first attempt a later one."""
    assert first_attempt(Delivery(b"")) == 1
    assert first_attempt(Delivery(b"", headers={"x-delivery-count": 2})) == 3
    assert first_attempt(Delivery(b"", headers={"x-delivery-count": "junk"})) == 1
    assert first_attempt(Delivery(b"", headers={"x-delivery-count": -4})) == 1
