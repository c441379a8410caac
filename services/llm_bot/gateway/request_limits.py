"""Per-key and per-user request limits of the gateway: requests per minute and requests in
flight, each refused with an OpenAI-style 429 ``rate_limit_exceeded`` and ``Retry-After``.

A key is the credential's identity (``Caller.identity``: the configured API key it
matched, or the user a signed token names), however the ``Authorization`` header spelled
it; a user is the tenant and user id the request acts as. A rate is a token bucket: it
refills at the rate per minute, evenly, and holds at most a sixth of it (ten seconds'
worth), so a client cannot spend a whole minute's requests in one burst (what a fixed
one-minute window would allow, twice at its edge). In-flight requests count from admission
to the end of the response (a stream included). A key's rate counts every attempt, refused
ones too, and is checked before the body is read (:meth:`RequestLimits.attempt`): a client
hammering past its limit costs a header parse per request, not a body read and a JSON
parse.

Everything is counted by each gateway process: behind a load balancer spreading requests
over N replicas, a key gets up to N times the figure (set it per replica). What a tenant
can spend in all is bounded by its token budget, across every replica. Zero turns a limit
off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from llm_bot.gateway.openai_wire import WireError

BURST_SHARE = 6
"""A bucket holds the rate per minute divided by this: ten seconds of requests."""
KEPT_BUCKETS = 10_000
"""Past this many, buckets that have refilled completely are dropped (memory bound)."""
Release = Callable[[], None]


@dataclass(frozen=True)
class LimitSettings:
    key_requests_per_minute: int = 0
    user_requests_per_minute: int = 0
    key_in_flight: int = 0
    user_in_flight: int = 0


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RequestLimits:
    settings: LimitSettings
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _in_flight: dict[str, int] = field(default_factory=dict)

    def attempt(self, key: str) -> None:
        """Count an attempt of ``key`` (before its body is read); a 429 ``WireError`` past
        the key's requests per minute."""
        scope = f"k:{key}"
        wait = self._take(scope, self.settings.key_requests_per_minute, spend_anyway=True)
        if wait is not None:
            raise _limited("requests per minute", scope, wait)

    def admit(self, key: str, tenant: str, user: str) -> Release:
        """Admit a request of ``key`` (its attempt counted) acting as ``tenant``/``user``;
        a 429 ``WireError`` past the key's in-flight cap or the user's limits (the user's
        counts unchanged then). Returns what ends the request's in-flight count
        (idempotent)."""
        user_scope = f"u:{tenant}|{user}"
        scopes = (
            (f"k:{key}", self.settings.key_in_flight),
            (user_scope, self.settings.user_in_flight),
        )
        for scope, in_flight in scopes:
            if in_flight and self._in_flight.get(scope, 0) >= in_flight:
                raise _limited("requests in flight", scope, 1)
        wait = self._take(user_scope, self.settings.user_requests_per_minute, spend_anyway=False)
        if wait is not None:
            raise _limited("requests per minute", user_scope, wait)
        for scope, _ in scopes:
            self._in_flight[scope] = self._in_flight.get(scope, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            for scope, _ in scopes:
                left = self._in_flight.get(scope, 1) - 1
                if left > 0:
                    self._in_flight[scope] = left
                else:
                    self._in_flight.pop(scope, None)

        return release

    def _take(self, scope: str, per_minute: int, *, spend_anyway: bool) -> int | None:
        """Take a token from ``scope``'s bucket: None when there was one, else the seconds
        until there is (a refused attempt still spends one when ``spend_anyway``: the bucket
        goes below zero, so hammering only pushes the next success further away)."""
        if not per_minute:
            return None
        now = self.clock()
        rate, capacity = per_minute / 60.0, max(1.0, per_minute / BURST_SHARE)
        bucket = self._buckets.get(scope)
        if bucket is None:
            if len(self._buckets) >= KEPT_BUCKETS:
                self._forget_full(now)
            bucket = self._buckets[scope] = _Bucket(tokens=capacity, at=now)
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        if spend_anyway:
            bucket.tokens = max(bucket.tokens - 1.0, -capacity)
        return max(1, math.ceil((1.0 - bucket.tokens) / rate))

    def _forget_full(self, now: float) -> None:
        """Drop buckets idle long enough to have refilled (they would start full again)."""
        self._buckets = {
            scope: bucket for scope, bucket in self._buckets.items() if now - bucket.at < 60.0
        }


def _limited(what: str, scope: str, retry_after: int) -> WireError:
    who = "this key" if scope.startswith("k:") else "this user"
    return WireError(
        429,
        f"rate limit reached for {who}: {what}; retry after {retry_after} s",
        code="rate_limit_exceeded",
        kind="requests",
        retry_after=retry_after,
    )
