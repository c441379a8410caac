"""What every process of llm-bot holds (``Foundation``: settings, Redis, telemetry, the
stores) and the running process's shape (start, stop, close)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from openai import AsyncOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry

from llm_bot import __version__
from llm_bot.adapters.openai_model import OpenAIChatModel
from llm_bot.adapters.providers import provider_name, takes_prompt_cache_key
from llm_bot.adapters.rabbit_replies import RabbitReplies
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.bootstrap.parts import (
    embedder,
    model_client,
    rate_limiter,
    recall_index,
    redis_client,
    token_guard,
)
from llm_bot.config import (
    Settings,
)
from llm_bot.delivery.consumer import EventConsumer
from llm_bot.delivery.fair_dispatch import Fairness
from llm_bot.ports import Embedder, RecallIndex
from llm_bot.service.handler import DeliveryHandler
from llm_bot.service.outcomes import Outcome
from llm_bot.service.token_spending import TenantTokenGuard
from llm_bot.telemetry.metrics import Metrics
from llm_bot.telemetry.tracing import TRACER_NAME, build_tracer_provider


@dataclass
class Foundation:
    """What the consumer and the worker share: telemetry, the model, Redis."""

    settings: Settings
    tracer_provider: TracerProvider
    tracer: Tracer
    metrics: Metrics
    model_client: AsyncOpenAI
    model: OpenAIChatModel
    redis: RedisClient
    embedder: Embedder | None
    index: RecallIndex
    spending: TenantTokenGuard | None = None
    """The tenants' token budgets; None when none are configured."""

    async def close(self) -> None:
        await self.model_client.close()
        if self.embedder is not None:
            await self.embedder.aclose()
        await self.index.aclose()
        await self.redis.aclose()
        self.tracer_provider.force_flush()

    def consumer(
        self,
        *,
        topology: Topology,
        handler: DeliveryHandler,
        prefetch: int,
        replies: RabbitReplies | None = None,
        after_publish: Callable[[Outcome], Awaitable[None]] | None = None,
        fairness: Fairness | None = None,
    ) -> EventConsumer:
        return EventConsumer(
            fairness=fairness,
            amqp_url=self.settings.broker.url.get_secret_value(),
            topology=topology,
            handler=handler,
            prefetch=prefetch,
            tracer=self.tracer,
            metrics=self.metrics,
            replies=replies,
            after_publish=after_publish,
        )


def build_foundation(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    registry: CollectorRegistry | None = None,
    calls_model: bool = True,
) -> Foundation:
    """Tests pass their own tracer provider (in-memory exporter) and metrics registry.
    ``calls_model=False``: a process that reads memory only (the inspector) needs no model
    settings (an OpenAI-compatible embedder still needs its endpoint)."""
    provider = tracer_provider or build_tracer_provider()
    tracer = provider.get_tracer(TRACER_NAME, __version__)
    metrics = Metrics(registry=registry or CollectorRegistry())
    limiter = rate_limiter(settings.rate_limits, metrics)
    config = settings.model
    client = model_client(config, required=calls_model)
    redis = redis_client(settings.redis)
    spending = token_guard(settings, redis, metrics.budgets)
    gen_ai_provider = config.provider_name or provider_name(config.base_url)
    model = OpenAIChatModel(
        client=client,
        model=config.name,
        api=config.api,
        tracer=tracer,
        metrics=metrics,
        provider_name=gen_ai_provider,
        send_cache_key=config.prompt_cache_key == "on"
        or (config.prompt_cache_key == "auto" and takes_prompt_cache_key(gen_ai_provider)),
        limiter=limiter,
        spending=spending,
    )
    return Foundation(
        settings=settings,
        tracer_provider=provider,
        tracer=tracer,
        metrics=metrics,
        model_client=client,
        model=model,
        redis=redis,
        embedder=embedder(settings, limiter, spending),
        index=recall_index(settings, redis, metrics),
        spending=spending,
    )


@dataclass
class _Running:
    """A process's wiring on its foundation: shortcuts and shutdown."""

    base: Foundation

    @property
    def settings(self) -> Settings:
        return self.base.settings

    @property
    def redis(self) -> RedisClient:
        return self.base.redis

    @property
    def metrics(self) -> Metrics:
        return self.base.metrics

    async def close(self) -> None:
        await self.base.close()
