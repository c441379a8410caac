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
from llm_bot.auth_throttle import configured_throttle
from llm_bot.bootstrap import redis_client, token_guard
from llm_bot.config import ConfigurationError, GatewayConfig, Settings
from llm_bot.entrypoints.http_server import HealthServer
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.gateway import http_protocol
from llm_bot.gateway.api_keys import ApiKeys
from llm_bot.gateway.app import GatewaySettings, create_app
from llm_bot.gateway.bus import GatewayBus
from llm_bot.gateway.credentials import Credentials
from llm_bot.gateway.request_limits import LimitSettings, RequestLimits
from llm_bot.gateway.tenant_personas import TenantPersonas
from llm_bot.gateway.token_quota import TokenQuota
from llm_bot.gateway.user_tokens import UserTokens
from llm_bot.service.token_spending import TenantTokenGuard
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

    config: GatewayConfig
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
        return self.config.port

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
    """The gateway reads its own group (``settings.gateway``), the broker's, the process's
    internal port, the body limit and, with token budgets, Redis."""
    gateway, process = settings.gateway, settings.process
    provider = tracer_provider or build_tracer_provider()
    metrics = GatewayMetrics(registry=registry or CollectorRegistry())
    broker_config = settings.broker
    bus = GatewayBus(
        amqp_url=broker_config.url.get_secret_value(),
        topology=Topology.from_settings(broker_config),
    )

    async def broker() -> str | None:
        return bus.readiness()

    redis = redis_client(settings.redis) if settings.token_budgets() else None
    guard = (
        token_guard(settings, redis, BudgetMetrics(registry=metrics.registry))
        if redis is not None
        else None
    )

    app = create_app(
        bus=bus,
        settings=_gateway_settings(settings, guard, metrics),
        metrics=metrics,
        tracer=provider.get_tracer(TRACER_NAME, __version__),
    )
    protocol = http_protocol.bounded_protocol(
        header_seconds=http_protocol.HEADER_READ_SECONDS,
        request_seconds=gateway.timeout_seconds + http_protocol.RESPONSE_GRACE_SECONDS,
        max_per_address=gateway.max_connections_per_address,
        on_refused=lambda _: metrics.connections_refused.labels("per_address").inc(),
    )
    config = uvicorn.Config(
        app,
        host=gateway.host,
        port=gateway.port,
        http=protocol,  # httptools, with header and whole-request deadlines
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(process.shutdown_grace_seconds),
        limit_concurrency=gateway.max_connections,  # beyond: 503 at once
        timeout_keep_alive=5,
    )
    server = _Server(config, handle_signals=handle_signals)

    async def listening() -> str | None:
        return None if server.started else "the API port is not listening yet"

    health = HealthServer(
        host=process.http_host,
        port=process.http_port,
        checks={"broker": broker, "api": listening},
        registry=metrics.registry,
    )
    return Gateway(
        config=gateway,
        bus=bus,
        server=server,
        health=health,
        tracer_provider=provider,
        metrics=metrics,
        redis=redis,
    )


def _gateway_settings(
    settings: Settings, guard: TenantTokenGuard | None, metrics: GatewayMetrics
) -> GatewaySettings:
    """What the gateway's app reads: its group, the body limit, the tenants' personas, the
    token quota (with budgets) and the per-key and per-user limits."""
    gateway = settings.gateway
    return GatewaySettings(
        credentials=_credentials(gateway),
        timeout_seconds=gateway.timeout_seconds,
        model_ids=gateway.models,
        max_body_bytes=settings.delivery.max_body_bytes,
        personas=TenantPersonas.parse(gateway.tenant_personas),
        quota=TokenQuota(guard=guard) if guard is not None else None,
        limits=RequestLimits(
            LimitSettings(
                key_requests_per_minute=gateway.key_requests_per_minute,
                user_requests_per_minute=gateway.user_requests_per_minute,
                key_in_flight=gateway.key_max_in_flight,
                user_in_flight=gateway.user_max_in_flight,
            )
        ),
        throttle=configured_throttle(gateway.auth, "gateway", metrics.registry),
    )


def _credentials(config: GatewayConfig) -> Credentials:
    return Credentials(
        keys=ApiKeys.parse(config.keys),
        tokens=UserTokens(
            secrets=UserTokens.parse_secrets(config.token_secrets.get_secret_value()),
            audience=config.token_audience,
            issuer=config.token_issuer,
            max_ttl_seconds=config.token_max_ttl_seconds,
        ),
    )


async def run_gateway(settings: Settings) -> None:
    """``llm-bot gateway``: refuse to start without keys or token secrets, then serve."""
    credentials = _credentials(settings.gateway)
    if not (credentials.keys or credentials.tokens):
        raise ConfigurationError(
            "invalid configuration: LLM_BOT_GATEWAY_KEYS: set at least one "
            "tenant=sha256:<digest> entry (make one with: llm-bot gateway hash-key), or "
            "LLM_BOT_GATEWAY_TOKEN_SECRETS"
        )
    gateway = build_gateway(settings)
    log.info(
        "gateway.starting", port=settings.gateway.port, internal_port=settings.process.http_port
    )
    try:
        if gateway.redis is not None:  # token budgets: their spend lives in Redis
            try:
                durability = await check_redis_durability(gateway.redis, settings.redis)
            except BaseException:
                await gateway.close()
                raise
            durability.report(registry=gateway.metrics.registry)
        await gateway.serve()
    finally:
        log.info("gateway.stopped")
