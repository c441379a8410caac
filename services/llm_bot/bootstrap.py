"""The composition root: builds every collaborator from ``Settings``, handing each the
settings group(s) it uses (``config/groups.py``).

Nothing else in the package connects to anything or reads the environment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import openai
from openai import AsyncOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry

from llm_bot import __version__
from llm_bot.adapters.model_rate_limit import ClientLimits, ModelRateLimiter
from llm_bot.adapters.openai_embedder import OpenAIEmbedder
from llm_bot.adapters.openai_model import OpenAIChatModel
from llm_bot.adapters.providers import provider_name, takes_prompt_cache_key
from llm_bot.adapters.rabbit_replies import RabbitReplies
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.adapters.redis_connection import RedisClient, connect_redis
from llm_bot.adapters.redis_fair_queue import RedisFairQueue
from llm_bot.adapters.redis_flow_checkpoints import RedisFlowCheckpoints
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_lease import RedisConversationLease
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.adapters.redis_schedules import RedisConversationSchedule
from llm_bot.adapters.redis_token_ledger import RedisTokenLedger
from llm_bot.config import (
    ConfigurationError,
    DeliveryConfig,
    ModelConfig,
    PersonaConfig,
    RateLimitConfig,
    RedisConfig,
    RetrievalConfig,
    Settings,
)
from llm_bot.context_budget import ContextBudget
from llm_bot.delivery.consumer import EventConsumer
from llm_bot.delivery.fair_dispatch import Fairness
from llm_bot.graph.builder import build_graph
from llm_bot.graph.runner import GraphChatRunner
from llm_bot.graph.state import GraphContext
from llm_bot.memory.retention import RetentionPolicy
from llm_bot.memory.tokens import default_token_counter
from llm_bot.memory.window import WindowBounds
from llm_bot.ports import Embedder, RecallIndex, StructuredModel
from llm_bot.service.classifier import MessageClassifier
from llm_bot.service.compactor import Compactor
from llm_bot.service.erasure import Eraser
from llm_bot.service.fairness import TenantShares
from llm_bot.service.flow_expiry import FlowExpiry
from llm_bot.service.flow_runner import FLOW_CHECKPOINT_GRACE_SECONDS, FlowRunner
from llm_bot.service.handler import DeliveryHandler, EventHandler
from llm_bot.service.indexer import Indexer
from llm_bot.service.memory_jobs import MemoryJobHandler
from llm_bot.service.outcomes import Outcome
from llm_bot.service.personas import PersonaCatalog, load_personas
from llm_bot.service.retention_sweep import RetentionSweep
from llm_bot.service.retriever import RetrievalSettings, Retriever
from llm_bot.service.retry import RetryPolicy
from llm_bot.service.token_spending import TenantTokenGuard
from llm_bot.service.tool_catalog import load_tool_catalog
from llm_bot.service.tool_timeouts import ToolTimeouts
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.telemetry.metrics import Metrics
from llm_bot.telemetry.tracing import TRACER_NAME, build_tracer_provider

KEYLESS_PLACEHOLDER = "not-needed"  # sent to keyless local servers, not a secret
DAY_SECONDS = 86400


def utc_now() -> datetime:
    return datetime.now(UTC)


def model_client(model: ModelConfig, *, required: bool = True) -> AsyncOpenAI:
    """``AsyncOpenAI`` for the configured endpoint; a clear error when neither a key nor an
    endpoint is set, unless ``required`` is False: a process that never calls the model
    (the inspector reads Redis, its dry run stops before the model call) starts without
    one, and any call it made would be refused by the provider for want of a key."""
    key = model.api_key.get_secret_value() if model.api_key else None
    if required and key is None and model.base_url is None:
        raise ConfigurationError(
            "invalid configuration: OPENAI_API_KEY: set it for api.openai.com, or set "
            "OPENAI_BASE_URL to an OpenAI-compatible server (for example "
            "http://localhost:11434/v1 for Ollama; any key works for keyless servers)"
        )
    # aiohttp under the SDK costs about half the CPU per request of its default httpx
    # transport (docs/benchmarks.md); LLM_BOT_MODEL_HTTP_CLIENT=httpx is the way back.
    http_client = (
        openai.DefaultAioHttpClient(timeout=model.timeout_seconds)
        if model.http_client == "aiohttp"
        else None
    )
    return AsyncOpenAI(
        api_key=key or KEYLESS_PLACEHOLDER,
        base_url=model.base_url,
        timeout=model.timeout_seconds,
        max_retries=0,
        http_client=http_client,
    )


def redis_client(redis: RedisConfig) -> RedisClient:
    """One server, a cluster (detected) or Sentinel's master: ``redis_connection.py``."""
    return connect_redis(redis.url.get_secret_value())


def redis_keys(redis: RedisConfig) -> RedisKeys:
    return RedisKeys(prefix=redis.key_prefix)


def memory_store(settings: Settings, client: RedisClient) -> RedisMemoryStore:
    memory = settings.memory
    return RedisMemoryStore(
        client=client,
        keys=redis_keys(settings.redis),
        ttl_seconds=memory.ttl_seconds,
        trace_retention_seconds=memory.raw_trace_retention_days * DAY_SECONDS,
        dedupe_ttl_seconds=memory.dedupe_ttl_seconds,
    )


def lease_wait_seconds(settings: Settings) -> float:
    """How long an event waits for its conversation's lease before a retry counts: long
    enough for the holder's model call, its retries' first steps, and an expired lease."""
    return max(60.0, 2 * settings.model.timeout_seconds + settings.delivery.lease_seconds)


def long_term_store(settings: Settings, client: RedisClient) -> RedisLongTermStore:
    long_term = settings.long_term
    return RedisLongTermStore(
        client=client,
        keys=redis_keys(settings.redis),
        retention=RetentionPolicy(
            long_term.max_items, long_term.retention_days, long_term.profile_retention_days
        ),
    )


def personas(config: PersonaConfig) -> PersonaCatalog:
    """The personas (and flows) of ``LLM_BOT_PERSONAS_PATH``, validated."""
    tools = load_tool_catalog(config.tools_path)
    return load_personas(config.personas_path, system_prompt=config.system_prompt, tools=tools)


def flow_runner(
    settings: Settings,
    catalog: PersonaCatalog,
    client: RedisClient,
    interpreter: StructuredModel | None = None,
) -> FlowRunner | None:
    """Runs the catalog's flows (``interpreter`` reads ambiguous answers; None: such an
    answer is asked again); None when the catalog has no flows."""
    if not catalog.flows:
        return None
    keys = redis_keys(settings.redis)
    ttl_seconds = settings.personas.flow_ttl_seconds
    checkpoints = RedisFlowCheckpoints(
        client=client, keys=keys, ttl_seconds=ttl_seconds + FLOW_CHECKPOINT_GRACE_SECONDS
    )
    return FlowRunner(
        flows=catalog.flows,
        checkpoints=checkpoints,
        schedule=RedisConversationSchedule(client=client, keys=keys.flows()),
        ttl_seconds=ttl_seconds,
        interpreter=interpreter,
    )


def tool_round_schedule(settings: Settings, client: RedisClient) -> RedisConversationSchedule:
    return RedisConversationSchedule(client=client, keys=redis_keys(settings.redis).tool_rounds())


def progress_store(settings: Settings, client: RedisClient) -> RedisMemoryProgress:
    return RedisMemoryProgress(
        client=client,
        keys=redis_keys(settings.redis),
        job_ttl_seconds=settings.memory.dedupe_ttl_seconds,
    )


def retry_policy(delivery: DeliveryConfig) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=delivery.max_attempts,
        base_delay=delivery.retry_base_seconds,
        max_delay=delivery.retry_max_seconds,
    )


def conversation_lease(settings: Settings, client: RedisClient) -> RedisConversationLease:
    return RedisConversationLease(
        client=client,
        keys=redis_keys(settings.redis),
        lease_seconds=settings.delivery.lease_seconds,
        max_wait_seconds=lease_wait_seconds(settings),
    )


def rate_limiter(limits: RateLimitConfig, metrics: Metrics) -> ModelRateLimiter:
    """The process's one limiter for model and embedding calls (SPEC 4 "Provider rate
    limits")."""
    return ModelRateLimiter(
        max_wait_seconds=limits.max_wait_seconds,
        metrics=metrics,
        limits=ClientLimits(
            max_concurrency=limits.max_concurrency,
            requests_per_minute=limits.requests_per_minute,
            tokens_per_minute=limits.tokens_per_minute,
        ),
    )


def token_guard(
    settings: Settings, client: RedisClient, metrics: BudgetMetrics
) -> TenantTokenGuard | None:
    """The tenants' token budgets (``LLM_BOT_TENANT_TOKEN_BUDGETS``); None when unset."""
    budgets = settings.token_budgets()
    if not budgets:
        return None
    return TenantTokenGuard(
        budgets=budgets,
        ledger=RedisTokenLedger(client=client, keys=redis_keys(settings.redis)),
        metrics=metrics,
        clock=utc_now,
    )


def embedder(
    settings: Settings, limiter: ModelRateLimiter, spending: TenantTokenGuard | None = None
) -> Embedder | None:
    """The configured embedding model (``LLM_BOT_EMBEDDINGS``); None when retrieval is off.
    ``limiter``: the process's model rate limiter (used by an OpenAI-compatible endpoint);
    ``spending``: the token budgets its usage counts against."""
    retrieval = settings.retrieval
    if retrieval.embeddings == "off":
        return None
    if retrieval.embeddings == "openai":
        model = settings.model
        endpoint = replace(model, base_url=retrieval.embedding_base_url or model.base_url)
        return OpenAIEmbedder(
            client=model_client(endpoint),
            model=retrieval.embedding_model or DEFAULT_OPENAI_EMBEDDING_MODEL,
            dimensions=retrieval.embedding_dimensions,
            limiter=limiter,
            spending=spending,
        )
    from llm_bot.adapters.script_embedder import local_embedder  # noqa: PLC0415  # heavy import

    return local_embedder(retrieval.embedding_model)


DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-small"


def recall_index(
    settings: Settings, client: RedisClient, metrics: Metrics | None = None
) -> RecallIndex:
    """The retrieval index: Qdrant when ``QDRANT_URL`` is set, else Redis (its searches of
    a copy whose refresh came late counted in ``metrics``)."""
    retrieval = settings.retrieval
    if retrieval.qdrant_url:
        from llm_bot.adapters.qdrant_recall_index import qdrant_recall_index  # noqa: PLC0415

        return qdrant_recall_index(retrieval, settings.redis, client)
    return RedisRecallIndex(
        client=client,
        keys=redis_keys(settings.redis),
        ttl_seconds=max(settings.long_term.retention_days, settings.memory.raw_trace_retention_days)
        * DAY_SECONDS,
        cache_entries=retrieval.cache_entries,
        cache_bytes=retrieval.cache_mb * 1024 * 1024,
        on_behind=metrics.retrieval_copy_behind.inc if metrics is not None else None,
    )


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


@dataclass
class Service(_Running):
    """The running pieces of ``llm-bot run``."""

    store: RedisMemoryStore
    consumer: EventConsumer
    handler: EventHandler


def retriever_settings(retrieval: RetrievalConfig, budget: ContextBudget) -> RetrievalSettings:
    """The retriever's settings: the search's, with recall's share of the prompt bounded
    by the model's input budget."""
    return RetrievalSettings(
        min_score=retrieval.min_score,
        topic_similarity=retrieval.topic_similarity,
        max_items=retrieval.max_items,
        max_tokens=min(budget.input_budget, retrieval.max_tokens),
        timeout_seconds=retrieval.timeout_ms / 1000,
        load_timeout_seconds=retrieval.load_timeout_ms / 1000,
    )


def retriever(base: Foundation) -> Retriever | None:
    if base.embedder is None:
        return None
    return Retriever(
        embedder=base.embedder,
        index=base.index,
        settings=retriever_settings(base.settings.retrieval, base.settings.model.context_budget()),
        metrics=base.metrics,
        tracer=base.tracer,
    )


def graph_context(
    settings: Settings,
    base: Foundation,
    store: RedisMemoryStore,
    catalog: PersonaCatalog,
    **wiring: Any,
) -> GraphContext:
    """What every graph run needs from settings and the foundation; ``wiring`` adds what a
    process has beyond that (the service: flows, tool rounds, replies; the inspector's dry
    run: nothing)."""
    model, memory = settings.model, settings.memory
    return GraphContext(
        memory=store,
        model=base.model,
        model_name=model.name,
        bounds=WindowBounds(memory.max_messages, memory.max_chars),
        system_prompt=settings.personas.system_prompt,
        clock=utc_now,
        tracer=base.tracer,
        metrics=base.metrics,
        budget=model.context_budget(),
        counter=default_token_counter(),
        retriever=retriever(base),
        tools=catalog.default.tools,
        personas=catalog,
        max_tool_rounds=settings.tools.max_rounds,
        **wiring,
    )


def build_service(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    registry: CollectorRegistry | None = None,
) -> Service:
    """Wire the consumer, handler, graph, memory, model and telemetry from settings."""
    base = build_foundation(settings, tracer_provider=tracer_provider, registry=registry)
    store = memory_store(settings, base.redis)
    replies = RabbitReplies(metrics=base.metrics)
    catalog = personas(settings.personas)
    flows = flow_runner(settings, catalog, base.redis, base.model)
    delivery = settings.delivery
    context = graph_context(
        settings,
        base,
        store,
        catalog,
        flows=flows,
        tool_rounds=tool_round_schedule(settings, base.redis),
        tool_result_timeout_seconds=settings.tools.result_timeout_seconds,
        replies=replies,
        stream_interval_seconds=delivery.stream_interval_ms / 1000,
    )
    handler = EventHandler(
        chats=GraphChatRunner(graph=build_graph(flows=flows is not None), context=context),
        flows=flows,
        lease=conversation_lease(settings, base.redis),
        eraser=Eraser(store=store, ltm=long_term_store(settings, base.redis), index=base.index),
        retry=retry_policy(settings.delivery),
        max_body_bytes=delivery.max_body_bytes,
        log_content=settings.logging.content,
        metrics=base.metrics,
    )
    consumer = base.consumer(
        topology=replace(Topology.from_settings(settings.broker), flow_results=flows is not None),
        handler=handler,
        prefetch=delivery.prefetch,
        replies=replies,
        after_publish=handler.published,
        fairness=fairness(settings, base.redis) if settings.fairness.enabled else None,
    )
    return Service(base=base, store=store, consumer=consumer, handler=handler)


def fairness(settings: Settings, client: RedisClient) -> Fairness:
    """Fair dispatch of the ingress (SPEC 4 "Fairness"): the fair queue in Redis, tenant
    shares of this replica's ``LLM_BOT_PREFETCH`` slots."""
    delivery, shares = settings.delivery, settings.fairness
    return Fairness(
        queue=RedisFairQueue(
            client=client,
            keys=redis_keys(settings.redis),
            lane=settings.broker.ingress_queue,
            lease_seconds=delivery.lease_seconds,
        ),
        lease=conversation_lease(settings, client),
        shares=TenantShares(
            slots=shares.slots, max_in_flight=shares.tenant_share, weights=shares.weights
        ),
        max_body_bytes=delivery.max_body_bytes,
        max_takes=settings.broker.delivery_limit,
        recover_every=delivery.lease_seconds / 3,
        max_waiting=shares.max_waiting,
        tenant_max_waiting=min(shares.tenant_max_waiting, shares.max_waiting),
    )


@dataclass
class Worker(_Running):
    """The running pieces of ``llm-bot worker``."""

    progress: RedisMemoryProgress
    ltm: RedisLongTermStore
    consumer: EventConsumer
    indexer: Indexer | None
    retention: RetentionSweep
    tool_timeouts: ToolTimeouts
    flow_expiry: FlowExpiry | None
    """None when no persona runs a flow."""

    def sweeps(self) -> tuple[Callable[[float], Awaitable[int]], ...]:
        """What the worker's sweep runs after the idle conversations."""
        sweeps = [self.retention.run_once, self.tool_timeouts.run_once]
        if self.flow_expiry is not None:
            sweeps.append(self.flow_expiry.run_once)
        return tuple(sweeps)


def worker_indexer(
    base: Foundation, progress: RedisMemoryProgress, ltm: RedisLongTermStore
) -> Indexer | None:
    """The indexer that keeps the retrieval index in step with conversations and long-term
    memory (None with retrieval off): the worker's, and the inspector's fact edits'."""
    if base.embedder is None:
        return None
    return Indexer(
        progress=progress,
        ltm=ltm,
        index=base.index,
        embedder=base.embedder,
        metrics=base.metrics,
        clock=utc_now,
    )


WORKER_PREFETCH = 8


def build_worker(
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    registry: CollectorRegistry | None = None,
) -> Worker:
    """Wire the memory worker: jobs consumer, classifier, compactor, long-term store."""
    base = build_foundation(settings, tracer_provider=tracer_provider, registry=registry)
    progress = progress_store(settings, base.redis)
    ltm = long_term_store(settings, base.redis)
    indexer = worker_indexer(base, progress, ltm)
    handler = MemoryJobHandler(
        progress=progress,
        classifier=MessageClassifier(
            progress=progress,
            ltm=ltm,
            model=base.model,
            threshold=settings.long_term.importance_threshold,
            metrics=base.metrics,
            clock=utc_now,
        ),
        compactor=Compactor(
            progress=progress,
            ltm=ltm,
            lease=conversation_lease(settings, base.redis),
            model=base.model,
            metrics=base.metrics,
            clock=utc_now,
        ),
        indexer=indexer,
        retry=retry_policy(settings.delivery),
        compaction_threshold_tokens=int(
            settings.memory.compaction_ratio * settings.model.context_budget().input_budget
        ),
        metrics=base.metrics,
        clock=utc_now,
    )
    catalog = personas(settings.personas)
    consumer = base.consumer(
        topology=replace(
            Topology.from_settings(settings.broker).for_memory_worker(),
            flow_results=bool(catalog.flows),
        ),
        handler=handler,
        prefetch=min(settings.delivery.prefetch, WORKER_PREFETCH),
    )
    retention = RetentionSweep(ltm=ltm, marks=progress, index=indexer, metrics=base.metrics)
    tool_timeouts = ToolTimeouts(
        rounds=tool_round_schedule(settings, base.redis),
        progress=progress,
        publish=consumer.publish_event,
        metrics=base.metrics,
    )
    flows = flow_runner(settings, catalog, base.redis, base.model)
    flow_expiry = (
        FlowExpiry(
            runner=flows,
            lease=conversation_lease(settings, base.redis),
            publish=consumer.publish_flow_result,
            metrics=base.metrics,
        )
        if flows is not None
        else None
    )
    return Worker(
        base=base,
        progress=progress,
        ltm=ltm,
        consumer=consumer,
        indexer=indexer,
        retention=retention,
        tool_timeouts=tool_timeouts,
        flow_expiry=flow_expiry,
    )
