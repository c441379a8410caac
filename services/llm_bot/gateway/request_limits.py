"""Per-key and per-user request limits of the gateway: requests per minute and requests in
flight, each refused with an OpenAI-style 429 ``rate_limit_exceeded`` and ``Retry-After``.

A key is the credential presented (an API key or a user token, known here by a digest of
it); a user is the tenant and user id the request acts as. Rates are counted in fixed
one-minute windows; in-flight requests from admission to the end of the response (a stream
included). A key's rate counts every attempt, refused ones too, and is checked before the
body is read (:meth:`RequestLimits.attempt`): a client hammering past its limit costs a
header parse per request, not a body read and a JSON parse. Both are counted by each gateway process: behind a load balancer spreading
requests over N replicas, a key gets up to N times the figure (set it per replica). What a
tenant can spend in all is bounded by its token budget, across every replica.

Zero turns a limit off.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from llm_bot.gateway.openai_wire import WireError

WINDOW_SECONDS = 60.0
Release = Callable[[], None]


def key_id(authorization: str) -> str:
    """A short digest of the presented credential: what per-key limits count by."""
    return hashlib.sha256(authorization.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class LimitSettings:
    key_requests_per_minute: int = 0
    user_requests_per_minute: int = 0
    key_in_flight: int = 0
    user_in_flight: int = 0


@dataclass
class _Window:
    started: float
    count: int = 0


@dataclass
class RequestLimits:
    settings: LimitSettings
    clock: Callable[[], float] = time.monotonic
    _windows: dict[str, _Window] = field(default_factory=dict)
    _in_flight: dict[str, int] = field(default_factory=dict)

    def attempt(self, key: str) -> None:
        """Count an attempt of ``key`` (before its body is read); a 429 ``WireError`` past
        the key's requests per minute."""
        now = self.clock()
        scope = f"k:{key}"
        window = self._window(scope, now)
        window.count += 1
        limit = self.settings.key_requests_per_minute
        if limit and window.count > limit:
            wait = math.ceil(window.started + WINDOW_SECONDS - now)
            raise _limited("requests per minute", scope, max(1, wait))

    def admit(self, key: str, tenant: str, user: str) -> Release:
        """Admit a request of ``key`` (its attempt counted) acting as ``tenant``/``user``;
        a 429 ``WireError`` past the key's in-flight cap or the user's limits (the user's
        counts unchanged then). Returns what ends the request's in-flight count
        (idempotent)."""
        now = self.clock()
        user_scope = f"u:{tenant}|{user}"
        window = self._window(user_scope, now)
        per_minute = self.settings.user_requests_per_minute
        if per_minute and window.count >= per_minute:
            wait = math.ceil(window.started + WINDOW_SECONDS - now)
            raise _limited("requests per minute", user_scope, max(1, wait))
        scopes = (
            (f"k:{key}", self.settings.key_in_flight),
            (user_scope, self.settings.user_in_flight),
        )
        for scope, in_flight in scopes:
            if in_flight and self._in_flight.get(scope, 0) >= in_flight:
                raise _limited("requests in flight", scope, 1)
        window.count += 1
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

    def _window(self, scope: str, now: float) -> _Window:
        window = self._windows.get(scope)
        if window is None or now - window.started >= WINDOW_SECONDS:
            if len(self._windows) > 10_000:  # keep memory bounded: drop ended windows
                self._windows = {
                    name: kept
                    for name, kept in self._windows.items()
                    if now - kept.started < WINDOW_SECONDS
                }
            window = self._windows[scope] = _Window(started=now)
        return window


def _limited(what: str, scope: str, retry_after: int) -> WireError:
    who = "this key" if scope.startswith("k:") else "this user"
    return WireError(
        429,
        f"rate limit reached for {who}: {what}; retry after {retry_after} s",
        code="rate_limit_exceeded",
        kind="requests",
        retry_after=retry_after,
    )
