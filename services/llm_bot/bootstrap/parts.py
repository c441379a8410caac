"""The collaborators both processes are built from: the model client, Redis and its
stores, personas, flows, leases, rate limits, token budgets, the embedder and the recall
index, each from the settings group(s) it reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import openai
from openai import AsyncOpenAI

from llm_bot.adapters.model_rate_limit import ClientLimits, ModelRateLimiter
from llm_bot.adapters.openai_embedder import OpenAIEmbedder
from llm_bot.adapters.redis_connection import RedisClient, connect_redis
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
    Settings,
)
from llm_bot.memory.retention import RetentionPolicy
from llm_bot.ports import Embedder, RecallIndex, StructuredModel
from llm_bot.service.flow_runner import FLOW_CHECKPOINT_GRACE_SECONDS, FlowRunner
from llm_bot.service.personas import PersonaCatalog, load_personas
from llm_bot.service.retry import RetryPolicy
from llm_bot.service.token_spending import TenantTokenGuard
from llm_bot.service.tool_catalog import load_tool_catalog
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.telemetry.metrics import Metrics

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
    # transport (docs/benchmarks-notebook.md); LLM_BOT_MODEL_HTTP_CLIENT=httpx is the way back.
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
