"""One limiter per process for the model provider (SPEC 4 "Provider rate limits").

A ``429`` is a pause, not a failure. When the provider refuses a call it says how long to
wait (``retry-after-ms``, ``retry-after``, or ``x-ratelimit-reset-requests`` /
``-tokens``); the limiter pauses every model call of the process until then, so the
process waits once instead of each event burning its attempts. After a pause one call goes
first (a probe); the others follow only when it was not refused again, so while a limit
lasts the process sends about one call per pause. A call's refusals count against
``LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS``, never against ``LLM_BOT_MAX_ATTEMPTS``; past that
budget the call fails as a ``model_error`` (the event is dead-lettered, replayable).

Chat, streaming, structured output, embeddings and the memory worker's calls all go through
the limiter of their process. Optional client-side limits for providers that punish bursts:
``LLM_BOT_MODEL_MAX_CONCURRENCY`` (calls at once) and ``LLM_BOT_MODEL_REQUESTS_PER_MINUTE`` /
``LLM_BOT_MODEL_TOKENS_PER_MINUTE`` (leaky buckets, aiolimiter).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import openai
import structlog
from aiolimiter import AsyncLimiter

from llm_bot.errors import ModelRejected
from llm_bot.telemetry.metrics import Metrics

T = TypeVar("T")
log = structlog.get_logger(__name__)

BACKOFF_WITHOUT_HINT = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Pauses after consecutive refusals that name no wait."""
FLOOR_AFTER_REFUSALS = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
"""The least pause after consecutive refusals, whatever the hint: a provider answering
``Retry-After: 0`` again and again is not called in a hot loop."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """How long the provider asks to wait, from its headers (None when it says nothing):
    ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date), else the longest of
    ``x-ratelimit-reset-requests`` / ``-tokens`` (durations such as ``6m0s`` or ``20ms``)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := _number(lowered.get("retry-after-ms"))) is not None:
        return max(0.0, ms / 1000)
    raw = lowered.get("retry-after")
    if raw is not None:
        if (seconds := _number(raw)) is not None:
            return max(0.0, seconds)
        with contextlib.suppress(TypeError, ValueError, IndexError):
            when = parsedate_to_datetime(raw)
            current = now or datetime.now(UTC)
            return max(0.0, (when - current).total_seconds())
    resets = [
        duration
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if (duration := _duration(lowered.get(name))) is not None
    ]
    return max(resets) if resets else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _duration(text: str | None) -> float | None:
    if not text:
        return None
    text = text.strip()
    if (plain := _number(text)) is not None:
        return max(0.0, plain)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


@dataclass(frozen=True)
class ClientLimits:
    """Limits the service keeps by itself, whatever the provider says (None: none)."""

    max_concurrency: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


class ModelRateLimiter:
    """The process's gate to the model provider."""

    def __init__(
        self,
        *,
        max_wait_seconds: float,
        metrics: Metrics,
        limits: ClientLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_wait = max_wait_seconds
        self._metrics = metrics
        self._clock = clock
        self._paused_until = 0.0
        self._half_open = False
        self._probe: asyncio.Event | None = None
        self._refusals_in_a_row = 0
        limits = limits or ClientLimits()
        self._concurrency = (
            asyncio.Semaphore(limits.max_concurrency) if limits.max_concurrency else None
        )
        self._requests = (
            AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
        )
        self._tokens = (
            AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None
        )

    async def run(self, source: str, call: Callable[[], Awaitable[T]], *, tokens: int = 1) -> T:
        """``call()`` once the process may call the provider; again after each ``429``
        until it is answered or the wait budget is spent (then ``ModelRejected``)."""
        first_refusal: float | None = None
        while True:
            probe = await self._gate()
            try:
                async with self._client_side(tokens):
                    result = await call()
            except openai.RateLimitError as exc:
                now = self._clock()
                first_refusal = now if first_refusal is None else first_refusal
                wait = self._refused(source, dict(exc.response.headers), now)
                if probe:
                    self._end_probe()
                if now - first_refusal + wait > self._max_wait:
                    raise ModelRejected(
                        f"model rate-limited for over {self._max_wait:.0f}s "
                        "(LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS)"
                    ) from exc
                continue
            except BaseException:
                if probe:
                    self._end_probe()
                raise
            if probe:
                self._end_probe()
            self._refusals_in_a_row = 0
            return result

    async def _gate(self) -> bool:
        """Wait out a pause (and a probe in flight); True when this call is the probe."""
        while True:
            now = self._clock()
            if now < self._paused_until:
                await asyncio.sleep(self._paused_until - now)
                continue
            if self._probe is not None:
                await self._probe.wait()
                continue
            if self._half_open:
                self._half_open = False
                self._probe = asyncio.Event()
                return True
            return False

    def _end_probe(self) -> None:
        if self._probe is not None:
            self._probe.set()
            self._probe = None

    def _refused(self, source: str, headers: Mapping[str, str], now: float) -> float:
        """Pause the process as the provider asks; returns the wait from now."""
        hint = retry_after_seconds(headers)
        if hint is None:
            hint = BACKOFF_WITHOUT_HINT[min(self._refusals_in_a_row, len(BACKOFF_WITHOUT_HINT) - 1)]
        floor = FLOOR_AFTER_REFUSALS[min(self._refusals_in_a_row, len(FLOOR_AFTER_REFUSALS) - 1)]
        hint = max(hint, floor)
        self._refusals_in_a_row += 1
        until = now + hint
        added = max(0.0, until - max(self._paused_until, now))
        if added > 0:
            self._paused_until = until
            self._metrics.model_paused_seconds.inc(added)
            log.warning("model.rate_limited", source=source, pause_seconds=round(hint, 3))
        self._half_open = True
        self._metrics.model_rate_limited.labels(source).inc()
        return max(0.0, self._paused_until - now)

    @contextlib.asynccontextmanager
    async def _client_side(self, tokens: int) -> AsyncIterator[None]:
        if self._requests is not None:
            await self._requests.acquire()
        if self._tokens is not None:
            await self._tokens.acquire(min(max(tokens, 1), self._tokens.max_rate))
        if self._concurrency is None:
            yield
            return
        async with self._concurrency:
            yield
