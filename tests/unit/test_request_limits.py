"""The gateway's per-key and per-user request limits: per minute and in flight."""

from __future__ import annotations

import pytest

from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.request_limits import LimitSettings, RequestLimits, key_id


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_past_its_requests_per_minute_waits_for_the_next_window() -> None:
    clock = Clock()
    limits = RequestLimits(LimitSettings(key_requests_per_minute=2), clock=clock)
    limits.attempt("k")
    clock.now += 10
    limits.attempt("k")
    with pytest.raises(WireError) as refused:
        limits.attempt("k")
    assert (refused.value.status, refused.value.code) == (429, "rate_limit_exceeded")
    assert refused.value.retry_after == 50
    assert "this key" in refused.value.message
    limits.attempt("other key")  # another key is counted apart
    clock.now += 50
    limits.attempt("k")  # a new window


def test_a_user_past_its_requests_per_minute_is_refused_whatever_the_key() -> None:
    limits = RequestLimits(LimitSettings(user_requests_per_minute=2), clock=Clock())
    limits.admit("k1", "t", "u")
    limits.admit("k2", "t", "u")
    with pytest.raises(WireError) as refused:
        limits.admit("k3", "t", "u")
    assert "this user" in refused.value.message
    limits.admit("k3", "t", "another user")


def test_a_user_past_its_in_flight_cap_is_refused_until_one_ends() -> None:
    limits = RequestLimits(LimitSettings(user_in_flight=2), clock=Clock())
    first = limits.admit("k1", "t", "u")
    limits.admit("k2", "t", "u")
    with pytest.raises(WireError) as refused:
        limits.admit("k3", "t", "u")
    assert refused.value.retry_after == 1
    assert "this user" in refused.value.message
    limits.admit("k3", "t", "someone else")
    limits.admit("k3", "other tenant", "u")
    first()
    first()  # releasing twice frees one slot, not two
    limits.admit("k3", "t", "u")
    with pytest.raises(WireError):
        limits.admit("k4", "t", "u")


def test_a_keys_refused_attempts_count_and_a_users_refusals_do_not() -> None:
    """A key hammering past its limit stays refused (its attempts count, refused or not);
    a request refused for the user's limits leaves the user's counts as they were."""
    limits = RequestLimits(
        LimitSettings(key_requests_per_minute=3, user_in_flight=1), clock=Clock()
    )
    limits.attempt("k")
    release = limits.admit("k", "t", "u")
    limits.attempt("k")
    with pytest.raises(WireError):
        limits.admit("k", "t", "u")  # in flight: refused, not counted for the user
    release()
    limits.attempt("k")
    limits.admit("k", "t", "u")
    for _ in range(3):
        with pytest.raises(WireError):
            limits.attempt("k")


def test_zero_is_no_limit_and_keys_are_known_by_a_digest() -> None:
    limits = RequestLimits(LimitSettings(), clock=Clock())
    for _ in range(1000):
        limits.admit("k", "t", "u")
    assert key_id("Bearer sk-secret") != key_id("Bearer sk-other")
    assert "sk-secret" not in key_id("Bearer sk-secret")
