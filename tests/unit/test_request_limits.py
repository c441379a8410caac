"""The gateway's per-key and per-user request limits: token buckets and in-flight caps."""

from __future__ import annotations

import pytest

from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.request_limits import LimitSettings, RequestLimits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_ten_seconds_of_requests_at_once_then_its_rate() -> None:
    """600 a minute: a burst of 100, then 10 a second; a refusal says when to retry."""
    clock = Clock()
    limits = RequestLimits(LimitSettings(key_requests_per_minute=600), clock=clock)
    for _ in range(100):
        limits.attempt("k")
    with pytest.raises(WireError) as refused:
        limits.attempt("k")
    assert (refused.value.status, refused.value.code) == (429, "rate_limit_exceeded")
    assert refused.value.retry_after == 1
    assert "this key" in refused.value.message
    limits.attempt("other key")  # another key has its own bucket
    clock.now += 2.0  # the refusal spent a token too: 20 back, 1 owed
    for _ in range(19):
        limits.attempt("k")
    with pytest.raises(WireError):
        limits.attempt("k")


def test_hammering_a_key_pushes_its_next_success_further_away() -> None:
    clock = Clock()
    limits = RequestLimits(LimitSettings(key_requests_per_minute=60), clock=clock)
    for _ in range(10):
        limits.attempt("k")
    waits: list[int] = []
    for _ in range(5):
        with pytest.raises(WireError) as refused:
            limits.attempt("k")
        assert refused.value.retry_after is not None
        waits.append(refused.value.retry_after)
    assert waits == sorted(waits)
    assert waits[-1] > waits[0]


def test_a_user_past_its_rate_is_refused_whatever_the_key_and_counts_nothing() -> None:
    clock = Clock()
    limits = RequestLimits(LimitSettings(user_requests_per_minute=12), clock=clock)
    limits.admit("k1", "t", "u")
    limits.admit("k2", "t", "u")  # a burst of 12 / 6 = 2
    for _ in range(3):
        with pytest.raises(WireError) as refused:
            limits.admit("k3", "t", "u")
        assert "this user" in refused.value.message
        assert refused.value.retry_after == 5
    limits.admit("k3", "t", "another user")
    clock.now += 5.0  # a user's refusals spent nothing: one token back in 5 s
    limits.admit("k3", "t", "u")


def test_a_user_past_its_in_flight_cap_is_refused_until_one_ends() -> None:
    limits = RequestLimits(LimitSettings(user_in_flight=2), clock=Clock())
    first = limits.admit("k1", "t", "u")
    limits.admit("k2", "t", "u")
    with pytest.raises(WireError) as refused:
        limits.admit("k3", "t", "u")
    assert refused.value.retry_after == 1
    limits.admit("k3", "t", "someone else")
    limits.admit("k3", "other tenant", "u")
    first()
    first()  # releasing twice frees one slot, not two
    limits.admit("k3", "t", "u")
    with pytest.raises(WireError):
        limits.admit("k4", "t", "u")


def test_zero_is_no_limit() -> None:
    limits = RequestLimits(LimitSettings(), clock=Clock())
    for _ in range(1000):
        limits.attempt("k")
        limits.admit("k", "t", "u")
