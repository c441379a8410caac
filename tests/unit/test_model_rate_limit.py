"""The process's model rate limiter: a 429 is a pause (adapters/model_rate_limit.py)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import httpx2
import openai
import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters.model_rate_limit import ClientLimits, ModelRateLimiter, retry_after_seconds
from llm_bot.errors import ModelRejected
from llm_bot.telemetry.metrics import Metrics


def _refusal(retry_after: float | None) -> openai.RateLimitError:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    response = httpx2.Response(  # the openai SDK's own httpx (a fork)
        429, headers=headers, request=httpx2.Request("POST", "http://model/v1/chat/completions")
    )
    return openai.RateLimitError("rate limited", response=response, body=None)


class Provider:
    """Refuses every call until ``until`` (monotonic), with ``retry_after``; counts calls."""

    def __init__(self, *, refuse_for: float, retry_after: float | None) -> None:
        self.until = time.monotonic() + refuse_for
        self.retry_after = retry_after
        self.calls: list[float] = []
        self.refused = 0

    async def call(self) -> str:
        self.calls.append(time.monotonic())
        if time.monotonic() < self.until:
            self.refused += 1
            raise _refusal(self.retry_after)
        await asyncio.sleep(0)
        return "ok"


def _limiter(max_wait: float = 30.0, limits: ClientLimits | None = None) -> ModelRateLimiter:
    return ModelRateLimiter(
        max_wait_seconds=max_wait, metrics=Metrics(registry=CollectorRegistry()), limits=limits
    )


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"Retry-After": "5"}, 5.0),
        ({"retry-after": "Wed, 25 Nov 2026 10:00:07 GMT"}, 7.0),
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),
        ({"x-ratelimit-reset-tokens": "1.5s"}, 1.5),
        ({"x-ratelimit-reset-tokens": "soon"}, None),
        ({"retry-after": "-3"}, 0.0),
        ({}, None),
    ],
)
def test_the_providers_wait_is_read_from_its_headers(
    headers: dict[str, str], seconds: float | None
) -> None:
    """retry-after-ms, then retry-after (seconds or a date), then the longest reset."""
    now = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
    assert retry_after_seconds(headers, now=now) == seconds


async def test_a_refusal_pauses_every_call_of_the_process_and_one_probe_goes_first() -> None:
    """20 calls at once against a provider refusing for 0.5 s with Retry-After 0.2: the
    refusals are the first wave plus about one probe per pause, and every call is answered."""
    provider = Provider(refuse_for=0.5, retry_after=0.2)
    limiter = _limiter()
    started = time.monotonic()
    results = await asyncio.gather(*(limiter.run("chat", provider.call) for _ in range(20)))
    assert results == ["ok"] * 20
    assert time.monotonic() - started >= 0.5
    late = [t for t in provider.calls if t - started > 0.05 and t < provider.until]
    assert len(late) <= 4, f"{len(late)} calls during the pause"


async def test_a_429_does_not_count_as_an_attempt_but_against_the_wait_budget() -> None:
    """Refused for longer than LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS: the call fails as a
    permanent model error after about that long, not after a number of tries."""
    provider = Provider(refuse_for=60, retry_after=0.1)
    limiter = _limiter(max_wait=0.35)
    started = time.monotonic()
    with pytest.raises(ModelRejected, match="rate-limited for over"):
        await limiter.run("chat", provider.call)
    assert 0.2 <= time.monotonic() - started < 1.0
    assert 3 <= provider.refused <= 5


async def test_retry_after_zero_again_and_again_is_not_a_hot_loop() -> None:
    """Retry-After: 0 from a provider that keeps refusing: pauses grow from a floor."""
    provider = Provider(refuse_for=0.6, retry_after=0)
    await _limiter().run("chat", provider.call)
    assert provider.refused <= 8


async def test_without_a_hint_the_pause_backs_off() -> None:
    """A 429 naming no wait pauses a second first."""
    provider = Provider(refuse_for=0.01, retry_after=None)
    limiter = _limiter()
    started = time.monotonic()
    assert await limiter.run("chat", provider.call) == "ok"
    assert 0.9 <= time.monotonic() - started < 2.0


async def test_client_side_concurrency_limit_holds() -> None:
    """LLM_BOT_MODEL_MAX_CONCURRENCY: never more calls at once than the limit."""
    limiter = _limiter(limits=ClientLimits(max_concurrency=2))
    running = 0
    peak = 0

    async def call() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    await asyncio.gather(*(limiter.run("chat", call) for _ in range(10)))
    assert peak == 2
