"""A running ``llm-bot gateway`` in-process, in front of a running service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import openai
from openai import AsyncOpenAI

from llm_bot.config import Settings
from llm_bot.entrypoints.gateway import Gateway, build_gateway
from llm_bot.gateway.api_keys import key_digest

TENANT_KEYS = {"tenant_a": "sk-test-tenant-a-0123456789", "tenant_b": "sk-test-tenant-b-9876543210"}
"""API keys of the test tenants (the gateway is configured with their digests only)."""


def gateway_keys() -> str:
    return ",".join(f"{tenant}={key_digest(key)}" for tenant, key in TENANT_KEYS.items())


@asynccontextmanager
async def running_gateway(settings: Settings, **wiring: Any) -> AsyncIterator[Gateway]:
    """The gateway on a free port (``settings`` should carry ``gateway_keys``)."""
    gateway = build_gateway(settings, handle_signals=False, **wiring)
    task = await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(task)


def sdk_client(gateway: Gateway, tenant: str = "tenant_a", **options: Any) -> AsyncOpenAI:
    """The official SDK pointed at the gateway, as an integrator would."""
    return AsyncOpenAI(
        base_url=gateway.base_url,
        api_key=options.pop("api_key", TENANT_KEYS.get(tenant, "")),
        max_retries=0,
        timeout=options.pop("timeout", 20.0),
        http_client=openai.DefaultAioHttpClient(),
        **options,
    )


def gateway_settings(make_settings: Callable[..., Settings], **overrides: Any) -> Settings:
    """A test's settings for a gateway on free local ports (public and internal) with the
    test tenants' keys."""
    values: dict[str, Any] = {
        "gateway_keys": gateway_keys(),
        "gateway_port": 0,
        "gateway_host": "127.0.0.1",
        "http_port": 0,
        "http_host": "127.0.0.1",
        "gateway_timeout_seconds": 20,
    }
    values.update(overrides)
    return make_settings(**values)
