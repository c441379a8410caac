"""Prometheus metrics of failed authentication at the gateway and the inspector's login
(``llm_bot.auth_throttle``): how many failed, how many were refused for it, and lockouts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

SURFACES = ("gateway", "inspector")
SCOPES = ("address", "key_prefix")


class AuthMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.failures = Counter(
            "llmbot_auth_failures",
            "Failed authentications (a wrong, malformed or missing key), by surface.",
            ["surface"],
            registry=registry,
        )
        self.throttled = Counter(
            "llmbot_auth_throttled",
            "Attempts refused with 429 because their client address or key prefix failed "
            "too often (failed-authentication throttling), by surface.",
            ["surface"],
            registry=registry,
        )
        self.lockouts = Counter(
            "llmbot_auth_lockouts",
            "Client addresses or key prefixes locked out after too many failures, by surface "
            "and scope (address, key_prefix).",
            ["surface", "scope"],
            registry=registry,
        )
        for surface in SURFACES:
            self.failures.labels(surface)
            self.throttled.labels(surface)
            for scope in SCOPES:
                self.lockouts.labels(surface, scope)

    def failed(self, surface: str) -> None:
        self.failures.labels(surface).inc()

    def refused(self, surface: str) -> None:
        self.throttled.labels(surface).inc()

    def locked_out(self, surface: str, scope: str) -> None:
        self.lockouts.labels(surface, scope).inc()
