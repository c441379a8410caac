"""The settings grouped by concern: what one part of the service reads, typed and frozen.

Each group is a view of :class:`~llm_bot.config.settings.Settings` (the flat environment
variables, read and validated once by ``load_settings``): ``settings.broker``,
``settings.retrieval``, ... are built from the same values on each access, so a group never
disagrees with its variables (a ``model_copy`` of the settings included). A module takes
the group(s) it uses instead of the whole settings; the composition root (``bootstrap``)
hands them out. The groups of the processes themselves (their ports, logging, the gateway's
and the inspector's own) are in ``process_groups.py``; which process reads which group:
docs/configuration.md "Settings groups".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import SecretStr

from llm_bot.config.tenant_weights import parse_tenant_weights
from llm_bot.context_budget import ContextBudget, default_context_budget

if TYPE_CHECKING:
    from llm_bot.config.fields import SettingsFields


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """RabbitMQ: where it is (``AMQP_URL``) and the topology's names
    (``LLM_BOT_INGRESS_*``, ``LLM_BOT_CANDIDATE_ROUTING_KEY``, ``LLM_BOT_ERROR_ROUTING_KEY``,
    ``LLM_BOT_DLX``, ``LLM_BOT_DLQ``, ``LLM_BOT_MEMORY_*``, ``LLM_BOT_FLOW_RESULT_*``,
    ``LLM_BOT_DELIVERY_LIMIT``)."""

    url: SecretStr
    exchange: str
    ingress_routing_key: str
    ingress_queue: str
    ingress_partitions: int
    candidate_routing_key: str
    error_routing_key: str
    dlx: str
    dlq: str
    memory_routing_key: str
    memory_queue: str
    memory_dlq: str
    flow_result_routing_key: str
    flow_result_queue: str
    delivery_limit: int

    @classmethod
    def of(cls, settings: SettingsFields) -> BrokerConfig:
        return cls(
            url=settings.amqp_url,
            exchange=settings.ingress_exchange,
            ingress_routing_key=settings.ingress_routing_key,
            ingress_queue=settings.ingress_queue,
            ingress_partitions=settings.ingress_partitions,
            candidate_routing_key=settings.candidate_routing_key,
            error_routing_key=settings.error_routing_key,
            dlx=settings.dlx,
            dlq=settings.dlq,
            memory_routing_key=settings.memory_routing_key,
            memory_queue=settings.memory_queue,
            memory_dlq=settings.memory_dlq,
            flow_result_routing_key=settings.flow_result_routing_key,
            flow_result_queue=settings.flow_result_queue,
            delivery_limit=settings.delivery_limit,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisConfig:
    """Redis: where it is (``REDIS_URL``), the first part of every key
    (``LLM_BOT_REDIS_KEY_PREFIX``) and how strictly its persistence and eviction settings
    are checked at start (``LLM_BOT_REDIS_DURABILITY``)."""

    url: SecretStr
    key_prefix: str
    durability: Literal["require", "warn", "off"] = "warn"

    @classmethod
    def of(cls, settings: SettingsFields) -> RedisConfig:
        return cls(
            url=settings.redis_url,
            key_prefix=settings.redis_key_prefix,
            durability=settings.redis_durability,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """The chat model and its endpoint (``OPENAI_*``, ``LLM_BOT_API``,
    ``LLM_BOT_PROVIDER_NAME``, ``LLM_BOT_PROMPT_CACHE_KEY``, ``LLM_BOT_MODEL_HTTP_CLIENT``)
    and its token budget (``LLM_BOT_MAX_CONTEXT_TOKENS``, ``LLM_BOT_MAX_OUTPUT_TOKENS``,
    ``LLM_BOT_CONTEXT_SAFETY_MARGIN``)."""

    api_key: SecretStr | None
    base_url: str | None
    name: str
    timeout_ms: int
    api: Literal["chat", "responses"]
    provider_name: str | None
    prompt_cache_key: Literal["auto", "on", "off"]
    http_client: Literal["aiohttp", "httpx"]
    max_context_tokens: int | None
    max_output_tokens: int | None
    context_safety_margin: int

    @classmethod
    def of(cls, settings: SettingsFields) -> ModelConfig:
        return cls(
            api_key=settings.openai_api_key,
            base_url=settings.openai_base_url,
            name=settings.openai_model,
            timeout_ms=settings.openai_timeout_ms,
            api=settings.api,
            provider_name=settings.provider_name,
            prompt_cache_key=settings.prompt_cache_key,
            http_client=settings.model_http_client,
            max_context_tokens=settings.max_context_tokens,
            max_output_tokens=settings.max_output_tokens,
            context_safety_margin=settings.context_safety_margin,
        )

    @property
    def timeout_seconds(self) -> float:
        return self.timeout_ms / 1000

    def context_budget(self) -> ContextBudget:
        """The model's defaults (by name) with any configured override applied."""
        base = default_context_budget(self.name)
        return ContextBudget(
            max_context_tokens=self.max_context_tokens or base.max_context_tokens,
            max_output_tokens=self.max_output_tokens or base.max_output_tokens,
            safety_margin=self.context_safety_margin,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimitConfig:
    """The process's own limits on model and embedding calls (SPEC 4 "Provider rate
    limits"): ``LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS``, ``LLM_BOT_MODEL_MAX_CONCURRENCY``,
    ``LLM_BOT_MODEL_REQUESTS_PER_MINUTE``, ``LLM_BOT_MODEL_TOKENS_PER_MINUTE``."""

    max_wait_seconds: float
    max_concurrency: int | None
    requests_per_minute: int | None
    tokens_per_minute: int | None

    @classmethod
    def of(cls, settings: SettingsFields) -> RateLimitConfig:
        return cls(
            max_wait_seconds=settings.rate_limit_max_wait_seconds,
            max_concurrency=settings.model_max_concurrency,
            requests_per_minute=settings.model_requests_per_minute,
            tokens_per_minute=settings.model_tokens_per_minute,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryConfig:
    """Working memory: the window (``LLM_BOT_MEMORY_MAX_MESSAGES``,
    ``LLM_BOT_MEMORY_MAX_CHARS``), its idle time and the worker's sweep
    (``LLM_BOT_MEMORY_TTL_SECONDS``, ``LLM_BOT_SWEEP_INTERVAL_SECONDS``), compaction
    (``LLM_BOT_COMPACTION_RATIO``), the raw trace and the processed events
    (``LLM_BOT_RAW_TRACE_RETENTION_DAYS``, ``LLM_BOT_DEDUPE_TTL_SECONDS``)."""

    max_messages: int
    max_chars: int
    ttl_seconds: int
    sweep_interval_seconds: float
    compaction_ratio: float
    raw_trace_retention_days: int
    dedupe_ttl_seconds: int

    @classmethod
    def of(cls, settings: SettingsFields) -> MemoryConfig:
        return cls(
            max_messages=settings.memory_max_messages,
            max_chars=settings.memory_max_chars,
            ttl_seconds=settings.memory_ttl_seconds,
            sweep_interval_seconds=settings.sweep_interval_seconds,
            compaction_ratio=settings.compaction_ratio,
            raw_trace_retention_days=settings.raw_trace_retention_days,
            dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LongTermConfig:
    """Long-term memory: what is promoted (``LLM_BOT_IMPORTANCE_THRESHOLD``) and how long it
    is kept (``LLM_BOT_LTM_MAX_ITEMS``, ``LLM_BOT_LTM_RETENTION_DAYS``,
    ``LLM_BOT_PROFILE_RETENTION_DAYS``)."""

    importance_threshold: float
    max_items: int
    retention_days: int
    profile_retention_days: int

    @classmethod
    def of(cls, settings: SettingsFields) -> LongTermConfig:
        return cls(
            importance_threshold=settings.importance_threshold,
            max_items=settings.ltm_max_items,
            retention_days=settings.ltm_retention_days,
            profile_retention_days=settings.profile_retention_days,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalConfig:
    """Retrieval: the embedding model (``LLM_BOT_EMBEDDINGS``, ``LLM_BOT_EMBEDDING_*``), the
    search (``LLM_BOT_RETRIEVAL_*``, ``LLM_BOT_TOPIC_SIMILARITY``) and the index
    (``LLM_BOT_RETRIEVAL_CACHE_ENTRIES``, ``LLM_BOT_RETRIEVAL_CACHE_MB``, ``QDRANT_URL``,
    ``QDRANT_API_KEY``)."""

    embeddings: Literal["local", "openai", "off"]
    embedding_model: str | None
    embedding_dimensions: int | None
    embedding_base_url: str | None
    min_score: float
    topic_similarity: float
    max_items: int | None
    max_tokens: int
    timeout_ms: int
    load_timeout_ms: int
    cache_entries: int
    cache_mb: int
    qdrant_url: str | None
    qdrant_api_key: SecretStr | None

    @classmethod
    def of(cls, settings: SettingsFields) -> RetrievalConfig:
        return cls(
            embeddings=settings.embeddings,
            embedding_model=settings.embedding_model,
            embedding_dimensions=settings.embedding_dimensions,
            embedding_base_url=settings.embedding_base_url,
            min_score=settings.retrieval_min_score,
            topic_similarity=settings.topic_similarity,
            max_items=settings.retrieval_max_items,
            max_tokens=settings.retrieval_max_tokens,
            timeout_ms=settings.retrieval_timeout_ms,
            load_timeout_ms=settings.retrieval_load_timeout_ms,
            cache_entries=settings.retrieval_cache_entries,
            cache_mb=settings.retrieval_cache_mb,
            qdrant_url=settings.qdrant_url,
            qdrant_api_key=settings.qdrant_api_key,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryConfig:
    """How events are taken, retried and answered: ``LLM_BOT_PREFETCH``,
    ``LLM_BOT_MAX_ATTEMPTS``, ``LLM_BOT_RETRY_BASE_SECONDS``, ``LLM_BOT_RETRY_MAX_SECONDS``,
    ``LLM_BOT_MAX_BODY_BYTES``, ``LLM_BOT_LEASE_SECONDS``, ``LLM_BOT_STREAM_INTERVAL_MS``."""

    prefetch: int
    max_attempts: int
    retry_base_seconds: float
    retry_max_seconds: float
    max_body_bytes: int
    lease_seconds: float
    stream_interval_ms: int

    @classmethod
    def of(cls, settings: SettingsFields) -> DeliveryConfig:
        return cls(
            prefetch=settings.prefetch,
            max_attempts=settings.max_attempts,
            retry_base_seconds=settings.retry_base_seconds,
            retry_max_seconds=settings.retry_max_seconds,
            max_body_bytes=settings.max_body_bytes,
            lease_seconds=settings.lease_seconds,
            stream_interval_ms=settings.stream_interval_ms,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FairnessConfig:
    """Fair dispatch of the ingress (SPEC 4 "Fairness"): ``LLM_BOT_FAIR_DISPATCH``, and how
    tenants share the replica's slots (``LLM_BOT_PREFETCH``) with
    ``LLM_BOT_TENANT_MAX_IN_FLIGHT`` and ``LLM_BOT_TENANT_WEIGHTS`` (parsed)."""

    enabled: bool
    slots: int
    tenant_max_in_flight: int | None
    weights: Mapping[str, float]
    max_waiting: int = 2048
    """``LLM_BOT_MAX_WAITING``: deliveries a replica holds unacked at most (its window)."""
    tenant_max_waiting: int = 1024
    """``LLM_BOT_TENANT_MAX_WAITING``: one tenant's of them admitted to Redis at most."""

    @classmethod
    def of(cls, settings: SettingsFields) -> FairnessConfig:
        return cls(
            enabled=settings.fair_dispatch,
            slots=settings.prefetch,
            tenant_max_in_flight=settings.tenant_max_in_flight,
            weights=parse_tenant_weights(settings.tenant_weights),
            max_waiting=settings.max_waiting,
            tenant_max_waiting=settings.tenant_max_waiting,
        )

    @property
    def tenant_share(self) -> int:
        """Slots a tenant may hold on a replica while others wait (weight 1): the setting,
        else a quarter of the slots (so four tenants can be served at full share)."""
        return self.tenant_max_in_flight or max(1, self.slots // 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonaConfig:
    """What the catalog of personas, tools and flows is loaded from
    (``LLM_BOT_SYSTEM_PROMPT``, ``LLM_BOT_TOOLS_PATH``, ``LLM_BOT_PERSONAS_PATH``) and how
    long a flow waits for an answer (``LLM_BOT_FLOW_TTL_SECONDS``)."""

    system_prompt: str
    tools_path: Path | None
    personas_path: Path | None
    flow_ttl_seconds: int

    @classmethod
    def of(cls, settings: SettingsFields) -> PersonaConfig:
        return cls(
            system_prompt=settings.system_prompt,
            tools_path=settings.tools_path,
            personas_path=settings.personas_path,
            flow_ttl_seconds=settings.flow_ttl_seconds,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolConfig:
    """Tool calls: ``LLM_BOT_MAX_TOOL_ROUNDS``, ``LLM_BOT_TOOL_RESULT_TIMEOUT_SECONDS``."""

    max_rounds: int
    result_timeout_seconds: float

    @classmethod
    def of(cls, settings: SettingsFields) -> ToolConfig:
        return cls(
            max_rounds=settings.max_tool_rounds,
            result_timeout_seconds=settings.tool_result_timeout_seconds,
        )


__all__ = [
    "BrokerConfig",
    "DeliveryConfig",
    "FairnessConfig",
    "LongTermConfig",
    "MemoryConfig",
    "ModelConfig",
    "PersonaConfig",
    "RateLimitConfig",
    "RedisConfig",
    "RetrievalConfig",
    "ToolConfig",
]
