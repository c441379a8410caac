"""Failed-authentication throttling (issue 44, item 3): per client address and per key
prefix, a lockout after N failures within the window, doubled when it recurs; a locked
prefix never refuses a right key (that check is the caller's: only failures ask)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from llm_bot.auth_throttle import AuthThrottle, ThrottleSettings
from llm_bot.telemetry.auth_metrics import AuthMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _throttle(clock: Clock, registry: CollectorRegistry | None = None) -> AuthThrottle:
    return AuthThrottle(
        ThrottleSettings(max_failures=3, window_seconds=10.0, lockout_seconds=5.0),
        "gateway",
        metrics=AuthMetrics(registry=registry or CollectorRegistry()),
        clock=clock,
    )


def test_an_address_is_locked_after_n_failures_in_the_window_and_again_for_twice_as_long() -> None:
    clock = Clock()
    throttle = _throttle(clock)
    assert [throttle.failed("10.0.0.1", f"guess-{n:04d}-xxxx") for n in range(3)] == [None] * 3
    assert throttle.address_locked("10.0.0.1") == 5
    assert throttle.failed("10.0.0.1", "x") == 5
    assert throttle.address_locked("10.0.0.2") is None  # another address is not
    clock.now += 5.0
    assert throttle.address_locked("10.0.0.1") is None
    assert [throttle.failed("10.0.0.1", "") for _ in range(3)] == [None] * 3
    assert throttle.address_locked("10.0.0.1") == 10


def test_failures_spread_wider_than_the_window_never_lock() -> None:
    clock = Clock()
    throttle = _throttle(clock)
    for _ in range(10):
        assert throttle.failed("10.0.0.1", "") is None
        clock.now += 6.0
    assert throttle.address_locked("10.0.0.1") is None


def test_a_prefix_guessed_from_many_addresses_is_locked_without_locking_the_addresses() -> None:
    clock = Clock()
    throttle = _throttle(clock)
    waits = [throttle.failed(f"10.0.1.{n}", f"sk-test-tenant-{n:04d}") for n in range(3)]
    assert waits == [None] * 3
    assert throttle.failed("10.0.2.1", "sk-test-tenant-9999") == 5  # same prefix, refused
    assert throttle.address_locked("10.0.1.0") is None
    assert throttle.failed("10.0.2.1", "sk-other-key-0001") is None


def test_a_lockout_is_a_metric_and_a_log_event_without_the_key() -> None:
    clock = Clock()
    registry = CollectorRegistry()
    throttle = _throttle(clock, registry)
    with capture_logs() as logs:
        for n in range(4):
            throttle.failed("10.0.0.1", f"sk-secret-{n:04d}-abcdef")
        throttle.address_locked("10.0.0.1")
    locked = [line for line in logs if line["event"] == "auth.locked_out"]
    assert {line["scope"] for line in locked} == {"address", "key_prefix"}
    assert "sk-secret" not in repr(logs)
    value = registry.get_sample_value
    assert value("llmbot_auth_failures_total", {"surface": "gateway"}) == 4
    assert value("llmbot_auth_throttled_total", {"surface": "gateway"}) == 2
    lockouts = {"surface": "gateway", "scope": "address"}
    assert value("llmbot_auth_lockouts_total", lockouts) == 1


def test_zero_failures_is_no_throttling() -> None:
    throttle = AuthThrottle(ThrottleSettings(max_failures=0), "inspector")
    assert all(throttle.failed("10.0.0.1", "k") is None for _ in range(100))
    assert throttle.address_locked("10.0.0.1") is None
