"""``llm-bot gateway``: the OpenAI-compatible front door, its own process and port, with
``/healthz``, ``/readyz`` and ``/metrics`` on the internal ``LLM_BOT_HTTP_PORT`` only.

FastAPI on uvicorn, the stack OpenAI-compatible servers in Python are built on (vLLM,
LiteLLM, llama-cpp-python's server): what operators and client authors expect, ASGI
streaming with backpressure (uvicorn stops reading a stream's body while the client's socket
buffer is full, and each request waits on its own reply queue, so a slow client slows only
itself), and ``httptools`` parsing for speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import structlog
import uvicorn
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from llm_bot import __version__
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.bootstrap import redis_client, token_guard
from llm_bot.config import ConfigurationError, Settings
from llm_bot.entrypoints.http_server import HealthServer
from llm_bot.gateway import http_protocol
from llm_bot.gateway.api_keys import ApiKeys
from llm_bot.gateway.app import GatewaySettings, create_app
from llm_bot.gateway.bus import GatewayBus
from llm_bot.gateway.credentials import Credentials
from llm_bot.gateway.request_limits import LimitSettings, RequestLimits
from llm_bot.gateway.tenant_personas import TenantPersonas
from llm_bot.gateway.token_quota import TokenQuota
from llm_bot.gateway.user_tokens import UserTokens
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.telemetry.gateway_metrics import GatewayMetrics
from llm_bot.telemetry.tracing import TRACER_NAME, build_tracer_provider

log = structlog.get_logger(__name__)


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling when run inside tests."""

    def __init__(self, config: uvicorn.Config, *, handle_signals: bool) -> None:
        super().__init__(config)
        self._handle_signals = handle_signals

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if self._handle_signals:
            with super().capture_signals():
                yield
        else:
            yield


@dataclass
class Gateway:
    """A gateway process's pieces: the bus connection, the public HTTP server and the
    internal one (probes and metrics)."""

    settings: Settings
    bus: GatewayBus
    server: _Server
    health: HealthServer
    tracer_provider: TracerProvider
    metrics: GatewayMetrics
    redis: RedisClient | None = None
    """For the tenants' token budgets only (None without budgets)."""

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`; useful with port 0)."""
        for server in self.server.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.settings.gateway_port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def internal_port(self) -> int:
        """The bound port of ``/healthz``, ``/readyz`` and ``/metrics``."""
        return self.health.port

    async def serve(self) -> None:
        """Connect, then serve until SIGTERM/SIGINT (uvicorn's graceful shutdown)."""
        await self.health.start()
        try:
            await self.bus.start()
            await self.server.serve()
        finally:
            await self.close()

    async def start(self) -> asyncio.Task[None]:
        """Connect and serve in a task (tests); returns once the port is bound."""
        await self.health.start()
        await self.bus.start()
        task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if task.done():
                await task
                raise RuntimeError("the gateway's HTTP server did not start")
            await asyncio.sleep(0.01)
        return task

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.close()

    async def close(self) -> None:
        await self.bus.close()
        if self.redis is not None:
            await self.redis.aclose()
        await self.health.stop()
        self.tracer_provider.force_flush()


def build_gateway(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    registry: CollectorRegistry | None = None,
    handle_signals: bool = True,
) -> Gateway:
    provider = tracer_provider or build_tracer_provider()
    metrics = GatewayMetrics(registry=registry or CollectorRegistry())
    bus = GatewayBus(
        amqp_url=settings.amqp_url.get_secret_value(), topology=Topology.from_settings(settings)
    )

    async def broker() -> str | None:
        return bus.readiness()

    redis = redis_client(settings) if settings.token_budgets() else None
    guard = (
        token_guard(settings, redis, BudgetMetrics(registry=metrics.registry))
        if redis is not None
        else None
    )

    app = create_app(
        bus=bus,
        settings=GatewaySettings(
            credentials=_credentials(settings),
            timeout_seconds=settings.gateway_timeout_seconds,
            model_ids=tuple(m.strip() for m in settings.gateway_models.split(",") if m.strip()),
            max_body_bytes=settings.max_body_bytes,
            personas=TenantPersonas.parse(settings.gateway_tenant_personas),
            quota=TokenQuota(guard=guard) if guard is not None else None,
            limits=RequestLimits(
                LimitSettings(
                    key_requests_per_minute=settings.gateway_key_requests_per_minute,
                    user_requests_per_minute=settings.gateway_user_requests_per_minute,
                    key_in_flight=settings.gateway_key_max_in_flight,
                    user_in_flight=settings.gateway_user_max_in_flight,
                )
            ),
        ),
        metrics=metrics,
        tracer=provider.get_tracer(TRACER_NAME, __version__),
    )
    protocol = http_protocol.bounded_protocol(
        header_seconds=http_protocol.HEADER_READ_SECONDS,
        request_seconds=settings.gateway_timeout_seconds + http_protocol.RESPONSE_GRACE_SECONDS,
    )
    config = uvicorn.Config(
        app,
        host=settings.gateway_host,
        port=settings.gateway_port,
        http=protocol,  # httptools, with header and whole-request deadlines
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_seconds),
        limit_concurrency=settings.gateway_max_connections,  # beyond: 503 at once
        timeout_keep_alive=5,
    )
    server = _Server(config, handle_signals=handle_signals)

    async def listening() -> str | None:
        return None if server.started else "the API port is not listening yet"

    health = HealthServer(
        host=settings.http_host,
        port=settings.http_port,
        checks={"broker": broker, "api": listening},
        registry=metrics.registry,
    )
    return Gateway(
        settings=settings,
        bus=bus,
        server=server,
        health=health,
        tracer_provider=provider,
        metrics=metrics,
        redis=redis,
    )


def _credentials(settings: Settings) -> Credentials:
    return Credentials(
        keys=ApiKeys.parse(settings.gateway_keys),
        tokens=UserTokens(
            secrets=UserTokens.parse_secrets(settings.gateway_token_secrets.get_secret_value()),
            audience=settings.gateway_token_audience,
            issuer=settings.gateway_token_issuer,
            max_ttl_seconds=settings.gateway_token_max_ttl_seconds,
        ),
    )


async def run_gateway(settings: Settings) -> None:
    """``llm-bot gateway``: refuse to start without keys or token secrets, then serve."""
    credentials = _credentials(settings)
    if not (credentials.keys or credentials.tokens):
        raise ConfigurationError(
            "invalid configuration: LLM_BOT_GATEWAY_KEYS: set at least one "
            "tenant=sha256:<digest> entry (make one with: llm-bot gateway hash-key), or "
            "LLM_BOT_GATEWAY_TOKEN_SECRETS"
        )
    gateway = build_gateway(settings)
    log.info("gateway.starting", port=settings.gateway_port, internal_port=settings.http_port)
    try:
        await gateway.serve()
    finally:
        log.info("gateway.stopped")
