"""The settings groups of the processes themselves: what every long-running process has
(``process``), logging (every command), and the groups only ``llm-bot gateway`` and
``llm-bot inspect`` read. Views of the flat settings, as the groups per concern
(``groups.py``) are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import SecretStr

if TYPE_CHECKING:
    from llm_bot.config.fields import SettingsFields


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessConfig:
    """What every long-running process (``run``, ``worker``, ``gateway``) has: its internal
    port for probes and metrics (``LLM_BOT_HTTP_HOST``, ``LLM_BOT_HTTP_PORT``) and its
    shutdown grace (``LLM_BOT_SHUTDOWN_GRACE_SECONDS``)."""

    http_host: str
    http_port: int
    shutdown_grace_seconds: float

    @classmethod
    def of(cls, settings: SettingsFields) -> ProcessConfig:
        return cls(
            http_host=settings.http_host,
            http_port=settings.http_port,
            shutdown_grace_seconds=settings.shutdown_grace_seconds,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggingConfig:
    """``LLM_BOT_LOG_LEVEL``, ``LLM_BOT_LOG_FORMAT``, ``LLM_BOT_LOG_CONTENT``."""

    level: Literal["debug", "info", "warning", "error"]
    format: Literal["json", "console"]
    content: bool

    @classmethod
    def of(cls, settings: SettingsFields) -> LoggingConfig:
        return cls(
            level=settings.log_level, format=settings.log_format, content=settings.log_content
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthThrottleConfig:
    """Failed-authentication throttling of the gateway and the inspector's login
    (``LLM_BOT_AUTH_*``, see ``llm_bot.auth_throttle``)."""

    max_failures: int
    window_seconds: float
    lockout_seconds: float

    @classmethod
    def of(cls, settings: SettingsFields) -> AuthThrottleConfig:
        return cls(
            max_failures=settings.auth_max_failures,
            window_seconds=settings.auth_failure_window_seconds,
            lockout_seconds=settings.auth_lockout_seconds,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """``llm-bot gateway``: its public API (``LLM_BOT_GATEWAY_*``). The access lists are
    the validated text of their variables; the gateway parses them into its own types."""

    host: str
    port: int
    keys: str
    token_secrets: SecretStr
    token_audience: str | None
    token_issuer: str | None
    token_max_ttl_seconds: int
    tenant_personas: str
    max_connections: int
    timeout_seconds: float
    key_requests_per_minute: int
    user_requests_per_minute: int
    key_max_in_flight: int
    user_max_in_flight: int
    models: tuple[str, ...]
    """``LLM_BOT_GATEWAY_MODELS``, split at its commas."""
    max_connections_per_address: int
    auth: AuthThrottleConfig

    @classmethod
    def of(cls, settings: SettingsFields) -> GatewayConfig:
        return cls(
            host=settings.gateway_host,
            port=settings.gateway_port,
            keys=settings.gateway_keys,
            token_secrets=settings.gateway_token_secrets,
            token_audience=settings.gateway_token_audience,
            token_issuer=settings.gateway_token_issuer,
            token_max_ttl_seconds=settings.gateway_token_max_ttl_seconds,
            tenant_personas=settings.gateway_tenant_personas,
            max_connections=settings.gateway_max_connections,
            timeout_seconds=settings.gateway_timeout_seconds,
            key_requests_per_minute=settings.gateway_key_requests_per_minute,
            user_requests_per_minute=settings.gateway_user_requests_per_minute,
            key_max_in_flight=settings.gateway_key_max_in_flight,
            user_max_in_flight=settings.gateway_user_max_in_flight,
            models=tuple(m.strip() for m in settings.gateway_models.split(",") if m.strip()),
            max_connections_per_address=settings.gateway_max_connections_per_address,
            auth=AuthThrottleConfig.of(settings),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class InspectorConfig:
    """``llm-bot inspect``: ``LLM_BOT_INSPECTOR_HOST``, ``LLM_BOT_INSPECTOR_PORT``,
    ``LLM_BOT_INSPECTOR_KEYS`` (the validated text; the inspector parses it)."""

    host: str
    port: int
    keys: str
    auth: AuthThrottleConfig

    @classmethod
    def of(cls, settings: SettingsFields) -> InspectorConfig:
        return cls(
            host=settings.inspector_host,
            port=settings.inspector_port,
            keys=settings.inspector_keys,
            auth=AuthThrottleConfig.of(settings),
        )


__all__ = [
    "AuthThrottleConfig",
    "GatewayConfig",
    "InspectorConfig",
    "LoggingConfig",
    "ProcessConfig",
]
