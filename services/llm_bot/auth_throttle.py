"""Failed-authentication throttling, for the gateway's keys and the inspector's login.

Guessing a key costs nothing unless failures are counted. Here they are, per client
address and per key prefix (the first :data:`PREFIX_CHARS` characters of what was
presented): :attr:`ThrottleSettings.max_failures` failures within
:attr:`ThrottleSettings.window_seconds` lock the scope (from the next attempt) for
:attr:`ThrottleSettings.lockout_seconds`, doubled for each lockout that follows within
:data:`MEMORY_SECONDS` of the last (at most :data:`MAX_DOUBLINGS` times). A refusal says
how long to wait (``Retry-After``).

- A locked **address** is refused before its credential is checked: its right key too
  (it is that address's own failures).
- A locked **prefix** only turns a wrong key's 401 into a 429: a right key with that prefix,
  from any address, is served. Someone else's guessing never locks a real user out.

Counted per process (like the request limits); scopes that have gone quiet are forgotten
(memory bound :data:`KEPT_SCOPES`). Each lockout is a metric and a log event that names the
address, or a digest of the prefix: never the key.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from prometheus_client import CollectorRegistry

from llm_bot.config.process_groups import AuthThrottleConfig
from llm_bot.telemetry.auth_metrics import AuthMetrics

log = structlog.get_logger(__name__)

PREFIX_CHARS = 12
"""How much of a presented credential names its prefix scope."""
MEMORY_SECONDS = 3600.0
"""A scope whose last lockout ended longer ago starts again from the first lockout."""
MAX_DOUBLINGS = 5
"""The lockout doubles at most this often (30 s → 16 min by default)."""
KEPT_SCOPES = 10_000
"""Past this many scopes, those with nothing running are dropped."""


@dataclass(frozen=True)
class ThrottleSettings:
    max_failures: int = 10
    """Failures of one scope within the window that lock it (0: no throttling)."""
    window_seconds: float = 60.0
    lockout_seconds: float = 30.0


@dataclass
class _Scope:
    failures: list[float] = field(default_factory=list)
    locked_until: float = 0.0
    lockouts: int = 0


@dataclass
class AuthThrottle:
    """The failure counts of one surface (``gateway`` or ``inspector``)."""

    settings: ThrottleSettings
    surface: str
    metrics: AuthMetrics | None = None
    clock: Callable[[], float] = time.monotonic
    _scopes: dict[str, _Scope] = field(default_factory=dict)

    def address_locked(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None when it may now."""
        wait = self._wait(f"a:{address}")
        if wait is not None and self.metrics is not None:
            self.metrics.refused(self.surface)
        return wait

    def failed(self, address: str, credential: str) -> int | None:
        """Count a failed attempt of ``address`` presenting ``credential`` (may be empty);
        the seconds to wait when its address or its prefix is locked now, else None (a
        plain 401)."""
        if self.metrics is not None:
            self.metrics.failed(self.surface)
        if not self.settings.max_failures:
            return None
        scopes = [f"a:{address}"]
        if credential:
            scopes.append(f"p:{credential[:PREFIX_CHARS]}")
        waits = [wait for scope in scopes if (wait := self._fail(scope)) is not None]
        if not waits:
            return None
        if self.metrics is not None:
            self.metrics.refused(self.surface)
        return max(waits)

    def _wait(self, key: str) -> int | None:
        scope = self._scopes.get(key)
        now = self.clock()
        if scope is None or scope.locked_until <= now:
            return None
        return max(1, math.ceil(scope.locked_until - now))

    def _fail(self, key: str) -> int | None:
        now = self.clock()
        scope = self._scopes.get(key)
        if scope is None:
            if len(self._scopes) >= KEPT_SCOPES:
                self._forget_quiet(now)
            scope = self._scopes[key] = _Scope()
        if scope.locked_until > now:
            return max(1, math.ceil(scope.locked_until - now))
        since = now - self.settings.window_seconds
        scope.failures = [at for at in scope.failures if at > since]
        scope.failures.append(now)
        if len(scope.failures) < self.settings.max_failures:
            return None
        if now - scope.locked_until > MEMORY_SECONDS:
            scope.lockouts = 0
        doublings = min(scope.lockouts, MAX_DOUBLINGS)
        seconds: float = self.settings.lockout_seconds * float(2**doublings)
        scope.lockouts += 1
        scope.locked_until = now + seconds
        scope.failures.clear()
        self._report(key, seconds)
        return None  # this failure is a plain 401: the lockout holds from the next attempt

    def _report(self, key: str, seconds: float) -> None:
        kind, _, name = key.partition(":")
        scope = "address" if kind == "a" else "key_prefix"
        who = (
            {"client": name}
            if kind == "a"
            else {"key_prefix_digest": hashlib.sha256(name.encode()).hexdigest()[:12]}
        )
        log.warning(
            "auth.locked_out",
            surface=self.surface,
            scope=scope,
            failures=self.settings.max_failures,
            window_seconds=self.settings.window_seconds,
            lockout_seconds=seconds,
            **who,
        )
        if self.metrics is not None:
            self.metrics.locked_out(self.surface, scope)

    def _forget_quiet(self, now: float) -> None:
        """Drop scopes neither locked nor failing within the window."""
        since = now - self.settings.window_seconds
        self._scopes = {
            key: scope
            for key, scope in self._scopes.items()
            if scope.locked_until > now or any(at > since for at in scope.failures)
        }


def configured_throttle(
    config: AuthThrottleConfig, surface: str, registry: CollectorRegistry
) -> AuthThrottle:
    """The throttle of ``surface`` from ``LLM_BOT_AUTH_*``, its metrics in ``registry``."""
    return AuthThrottle(
        ThrottleSettings(
            max_failures=config.max_failures,
            window_seconds=config.window_seconds,
            lockout_seconds=config.lockout_seconds,
        ),
        surface,
        metrics=AuthMetrics(registry=registry),
    )
