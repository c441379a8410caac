"""The composition root: builds every collaborator from ``Settings``.

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
from llm_bot.config import ConfigurationError, Settings
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


def model_client(settings: Settings) -> AsyncOpenAI:
    """``AsyncOpenAI`` for the configured endpoint; a clear error when neither a key nor an
    endpoint is set."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if key is None and settings.openai_base_url is None:
        raise ConfigurationError(
            "invalid configuration: OPENAI_API_KEY: set it for api.openai.com, or set "
            "OPENAI_BASE_URL to an OpenAI-compatible server (for example "
            "http://localhost:11434/v1 for Ollama; any key works for keyless servers)"
        )
    # aiohttp under the SDK costs about half the CPU per request of its default httpx
    # transport (docs/benchmarks.md); LLM_BOT_MODEL_HTTP_CLIENT=httpx is the way back.
    http_client = (
        openai.DefaultAioHttpClient(timeout=settings.openai_timeout_seconds)
        if settings.model_http_client == "aiohttp"
        else None
    )
    return AsyncOpenAI(
        api_key=key or KEYLESS_PLACEHOLDER,
        base_url=settings.openai_base_url,
        timeout=settings.openai_timeout_seconds,
        max_retries=0,
        http_client=http_client,
    )


def redis_client(settings: Settings) -> RedisClient:
    """One server, a cluster (detected) or Sentinel's master: ``redis_connection.py``."""
    return connect_redis(settings.redis_url.get_secret_value())


def memory_store(settings: Settings, client: RedisClient) -> RedisMemoryStore:
    return RedisMemoryStore(
        client=client,
        keys=RedisKeys(prefix=settings.redis_key_prefix),
        ttl_seconds=settings.memory_ttl_seconds,
        trace_retention_seconds=settings.raw_trace_retention_days * DAY_SECONDS,
        dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
    )


def lease_wait_seconds(settings: Settings) -> float:
    """How long an event waits for its conversation's lease before a retry counts: long
    enough for the holder's model call, its retries' first steps, and an expired lease."""
    return max(60.0, 2 * settings.openai_timeout_seconds + settings.lease_seconds)


def long_term_store(settings: Settings, client: RedisClient) -> RedisLongTermStore:
    return RedisLongTermStore(
        client=client,
        keys=RedisKeys(prefix=settings.redis_key_prefix),
        retention=RetentionPolicy(
            settings.ltm_max_items, settings.ltm_retention_days, settings.profile_retention_days
        ),
    )


def personas(settings: Settings) -> PersonaCatalog:
    """The personas (and flows) of ``LLM_BOT_PERSONAS_PATH``, validated."""
    tools = load_tool_catalog(settings.tools_path)
    return load_personas(settings.personas_path, system_prompt=settings.system_prompt, tools=tools)


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
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    checkpoints = RedisFlowCheckpoints(
        client=client,
        keys=keys,
        ttl_seconds=settings.flow_ttl_seconds + FLOW_CHECKPOINT_GRACE_SECONDS,
    )
    return FlowRunner(
        flows=catalog.flows,
        checkpoints=checkpoints,
        schedule=RedisConversationSchedule(client=client, keys=keys.flows()),
        ttl_seconds=settings.flow_ttl_seconds,
        interpreter=interpreter,
    )


def tool_round_schedule(settings: Settings, client: RedisClient) -> RedisConversationSchedule:
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    return RedisConversationSchedule(client=client, keys=keys.tool_rounds())


def progress_store(settings: Settings, client: RedisClient) -> RedisMemoryProgress:
    return RedisMemoryProgress(
        client=client,
        keys=RedisKeys(prefix=settings.redis_key_prefix),
        job_ttl_seconds=settings.dedupe_ttl_seconds,
    )


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=settings.max_attempts,
        base_delay=settings.retry_base_seconds,
        max_delay=settings.retry_max_seconds,
    )


def conversation_lease(settings: Settings, client: RedisClient) -> RedisConversationLease:
    return RedisConversationLease(
        client=client,
        keys=RedisKeys(prefix=settings.redis_key_prefix),
        lease_seconds=settings.lease_seconds,
        max_wait_seconds=lease_wait_seconds(settings),
    )


def rate_limiter(settings: Settings, metrics: Metrics) -> ModelRateLimiter:
    """The process's one limiter for model and embedding calls (SPEC 4 "Provider rate
    limits")."""
    return ModelRateLimiter(
        max_wait_seconds=settings.rate_limit_max_wait_seconds,
        metrics=metrics,
        limits=ClientLimits(
            max_concurrency=settings.model_max_concurrency,
            requests_per_minute=settings.model_requests_per_minute,
            tokens_per_minute=settings.model_tokens_per_minute,
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
        ledger=RedisTokenLedger(client=client, keys=RedisKeys(prefix=settings.redis_key_prefix)),
        metrics=metrics,
        clock=utc_now,
    )


def embedder(
    settings: Settings, limiter: ModelRateLimiter, spending: TenantTokenGuard | None = None
) -> Embedder | None:
    """The configured embedding model (``LLM_BOT_EMBEDDINGS``); None when retrieval is off.
    ``limiter``: the process's model rate limiter (used by an OpenAI-compatible endpoint);
    ``spending``: the token budgets its usage counts against."""
    if settings.embeddings == "off":
        return None
    if settings.embeddings == "openai":
        endpoint = settings.model_copy(
            update={"openai_base_url": settings.embedding_base_url or settings.openai_base_url}
        )
        return OpenAIEmbedder(
            client=model_client(endpoint),
            model=settings.embedding_model or DEFAULT_OPENAI_EMBEDDING_MODEL,
            dimensions=settings.embedding_dimensions,
            limiter=limiter,
            spending=spending,
        )
    from llm_bot.adapters.script_embedder import local_embedder  # noqa: PLC0415  # heavy import

    return local_embedder(settings.embedding_model)


DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-small"


def recall_index(settings: Settings, client: RedisClient) -> RecallIndex:
    """The retrieval index: Qdrant when ``QDRANT_URL`` is set, else Redis."""
    if settings.qdrant_url:
        from llm_bot.adapters.qdrant_recall_index import qdrant_recall_index  # noqa: PLC0415

        return qdrant_recall_index(settings, client)
    return RedisRecallIndex(
        client=client,
        keys=RedisKeys(prefix=settings.redis_key_prefix),
        ttl_seconds=max(settings.ltm_retention_days, settings.raw_trace_retention_days)
        * DAY_SECONDS,
        cache_entries=settings.retrieval_cache_entries,
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
            amqp_url=self.settings.amqp_url.get_secret_value(),
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
) -> Foundation:
    """Tests pass their own tracer provider (in-memory exporter) and metrics registry."""
    provider = tracer_provider or build_tracer_provider()
    tracer = provider.get_tracer(TRACER_NAME, __version__)
    metrics = Metrics(registry=registry or CollectorRegistry())
    limiter = rate_limiter(settings, metrics)
    client = model_client(settings)
    redis = redis_client(settings)
    spending = token_guard(settings, redis, metrics.budgets)
    gen_ai_provider = settings.provider_name or provider_name(settings.openai_base_url)
    model = OpenAIChatModel(
        client=client,
        model=settings.openai_model,
        api=settings.api,
        tracer=tracer,
        metrics=metrics,
        provider_name=gen_ai_provider,
        send_cache_key=settings.prompt_cache_key == "on"
        or (settings.prompt_cache_key == "auto" and takes_prompt_cache_key(gen_ai_provider)),
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
        index=recall_index(settings, redis),
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


def retriever_settings(settings: Settings) -> RetrievalSettings:
    return RetrievalSettings(
        min_score=settings.retrieval_min_score,
        topic_similarity=settings.topic_similarity,
        max_items=settings.retrieval_max_items,
        max_tokens=min(settings.context_budget().input_budget, settings.retrieval_max_tokens),
        timeout_seconds=settings.retrieval_timeout_ms / 1000,
    )


def retriever(base: Foundation) -> Retriever | None:
    if base.embedder is None:
        return None
    return Retriever(
        embedder=base.embedder,
        index=base.index,
        settings=retriever_settings(base.settings),
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
    return GraphContext(
        memory=store,
        model=base.model,
        model_name=settings.openai_model,
        bounds=WindowBounds(settings.memory_max_messages, settings.memory_max_chars),
        system_prompt=settings.system_prompt,
        clock=utc_now,
        tracer=base.tracer,
        metrics=base.metrics,
        budget=settings.context_budget(),
        counter=default_token_counter(),
        retriever=retriever(base),
        tools=catalog.default.tools,
        personas=catalog,
        max_tool_rounds=settings.max_tool_rounds,
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
    catalog = personas(settings)
    flows = flow_runner(settings, catalog, base.redis, base.model)
    context = graph_context(
        settings,
        base,
        store,
        catalog,
        flows=flows,
        tool_rounds=tool_round_schedule(settings, base.redis),
        tool_result_timeout_seconds=settings.tool_result_timeout_seconds,
        replies=replies,
        stream_interval_seconds=settings.stream_interval_ms / 1000,
    )
    handler = EventHandler(
        chats=GraphChatRunner(graph=build_graph(flows=flows is not None), context=context),
        flows=flows,
        lease=conversation_lease(settings, base.redis),
        eraser=Eraser(store=store, ltm=long_term_store(settings, base.redis), index=base.index),
        retry=retry_policy(settings),
        max_body_bytes=settings.max_body_bytes,
        log_content=settings.log_content,
        metrics=base.metrics,
    )
    consumer = base.consumer(
        topology=replace(Topology.from_settings(settings), flow_results=flows is not None),
        handler=handler,
        prefetch=settings.prefetch,
        replies=replies,
        after_publish=handler.published,
        fairness=fairness(settings, base.redis) if settings.fair_dispatch else None,
    )
    return Service(base=base, store=store, consumer=consumer, handler=handler)


def fairness(settings: Settings, client: RedisClient) -> Fairness:
    """Fair dispatch of the ingress (SPEC 4 "Fairness"): the fair queue in Redis, tenant
    shares of this replica's ``LLM_BOT_PREFETCH`` slots."""
    return Fairness(
        queue=RedisFairQueue(
            client=client,
            keys=RedisKeys(prefix=settings.redis_key_prefix),
            lane=settings.ingress_queue,
            lease_seconds=settings.lease_seconds,
        ),
        lease=conversation_lease(settings, client),
        shares=TenantShares(
            slots=settings.prefetch,
            max_in_flight=settings.tenant_share(),
            weights=settings.tenant_weight_map(),
        ),
        max_body_bytes=settings.max_body_bytes,
        max_takes=settings.delivery_limit,
        recover_every=settings.lease_seconds / 3,
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
            threshold=settings.importance_threshold,
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
        retry=retry_policy(settings),
        compaction_threshold_tokens=int(
            settings.compaction_ratio * settings.context_budget().input_budget
        ),
        metrics=base.metrics,
        clock=utc_now,
    )
    catalog = personas(settings)
    consumer = base.consumer(
        topology=replace(
            Topology.from_settings(settings).for_memory_worker(),
            flow_results=bool(catalog.flows),
        ),
        handler=handler,
        prefetch=min(settings.prefetch, WORKER_PREFETCH),
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
