"""The environment variables (and an optional ``.env`` file) as flat fields, validated at
start: one field per variable, each field's alias its variable (SPEC section 7: the names
are a contract). :class:`~llm_bot.config.settings.Settings` adds the groups modules take;
the groups' builders read these fields (so they import this module, not ``settings.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from llm_bot.access_lists import parse_key_entries, parse_tenant_personas, parse_token_secrets
from llm_bot.amqp_url import parse_amqp_url
from llm_bot.config.tenant_weights import parse_tenant_weights
from llm_bot.redis_url import parse_redis_url
from llm_bot.token_budgets import TenantTokenBudgets


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


class SettingsFields(BaseSettings):
    """Every setting of the service, flat; each field's alias is its environment variable."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        populate_by_name=True,
        frozen=True,
    )

    amqp_url: SecretStr = Field(
        SecretStr("amqp://guest:guest@localhost:5672/"), validation_alias=_env("AMQP_URL")
    )
    redis_url: SecretStr = Field(
        SecretStr("redis://localhost:6379/0"), validation_alias=_env("REDIS_URL")
    )
    openai_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=_env("OPENAI_BASE_URL"))
    openai_model: str = Field("gpt-4o-mini", min_length=1, validation_alias=_env("OPENAI_MODEL"))
    openai_timeout_ms: int = Field(30000, ge=100, validation_alias=_env("OPENAI_TIMEOUT_MS"))
    api: Literal["chat", "responses"] = Field("chat", validation_alias=_env("LLM_BOT_API"))
    provider_name: str | None = Field(
        None, max_length=64, validation_alias=_env("LLM_BOT_PROVIDER_NAME")
    )
    prompt_cache_key: Literal["auto", "on", "off"] = Field(
        "auto", validation_alias=_env("LLM_BOT_PROMPT_CACHE_KEY")
    )
    model_http_client: Literal["aiohttp", "httpx"] = Field(
        "aiohttp", validation_alias=_env("LLM_BOT_MODEL_HTTP_CLIENT")
    )
    system_prompt: str = Field("", validation_alias=_env("LLM_BOT_SYSTEM_PROMPT"))

    memory_max_messages: int = Field(8, ge=2, validation_alias=_env("LLM_BOT_MEMORY_MAX_MESSAGES"))
    memory_max_chars: int = Field(8000, ge=1, validation_alias=_env("LLM_BOT_MEMORY_MAX_CHARS"))
    memory_ttl_seconds: int = Field(1800, ge=1, validation_alias=_env("LLM_BOT_MEMORY_TTL_SECONDS"))
    redis_durability: Literal["require", "warn", "off"] = Field(
        "warn", validation_alias=_env("LLM_BOT_REDIS_DURABILITY")
    )
    redis_key_prefix: str = Field(
        "llmbot",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$",
        validation_alias=_env("LLM_BOT_REDIS_KEY_PREFIX"),
    )
    raw_trace_retention_days: int = Field(
        30, ge=1, validation_alias=_env("LLM_BOT_RAW_TRACE_RETENTION_DAYS")
    )
    dedupe_ttl_seconds: int = Field(
        7 * 24 * 3600, ge=60, validation_alias=_env("LLM_BOT_DEDUPE_TTL_SECONDS")
    )

    max_context_tokens: int | None = Field(
        None, ge=256, validation_alias=_env("LLM_BOT_MAX_CONTEXT_TOKENS")
    )
    max_output_tokens: int | None = Field(
        None, ge=16, validation_alias=_env("LLM_BOT_MAX_OUTPUT_TOKENS")
    )
    context_safety_margin: int = Field(
        256, ge=0, validation_alias=_env("LLM_BOT_CONTEXT_SAFETY_MARGIN")
    )
    compaction_ratio: float = Field(
        0.8, gt=0.0, le=1.0, validation_alias=_env("LLM_BOT_COMPACTION_RATIO")
    )
    sweep_interval_seconds: float = Field(
        30.0, gt=0, validation_alias=_env("LLM_BOT_SWEEP_INTERVAL_SECONDS")
    )
    prefetch: int = Field(32, ge=1, le=65535, validation_alias=_env("LLM_BOT_PREFETCH"))
    fair_dispatch: bool = Field(True, validation_alias=_env("LLM_BOT_FAIR_DISPATCH"))
    tenant_max_in_flight: int | None = Field(
        None, ge=1, le=65535, validation_alias=_env("LLM_BOT_TENANT_MAX_IN_FLIGHT")
    )
    max_waiting: int = Field(2048, ge=1, le=65535, validation_alias=_env("LLM_BOT_MAX_WAITING"))
    tenant_max_waiting: int = Field(
        1024, ge=1, le=65535, validation_alias=_env("LLM_BOT_TENANT_MAX_WAITING")
    )
    tenant_weights: str = Field("", validation_alias=_env("LLM_BOT_TENANT_WEIGHTS"))
    tenant_token_budgets: str = Field("", validation_alias=_env("LLM_BOT_TENANT_TOKEN_BUDGETS"))
    max_attempts: int = Field(5, ge=1, le=100, validation_alias=_env("LLM_BOT_MAX_ATTEMPTS"))
    max_body_bytes: int = Field(262144, ge=1024, validation_alias=_env("LLM_BOT_MAX_BODY_BYTES"))
    retry_base_seconds: float = Field(
        0.5, gt=0, validation_alias=_env("LLM_BOT_RETRY_BASE_SECONDS")
    )
    retry_max_seconds: float = Field(30.0, gt=0, validation_alias=_env("LLM_BOT_RETRY_MAX_SECONDS"))
    rate_limit_max_wait_seconds: float = Field(
        300.0, gt=0, validation_alias=_env("LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS")
    )
    model_max_concurrency: int | None = Field(
        None, ge=1, validation_alias=_env("LLM_BOT_MODEL_MAX_CONCURRENCY")
    )
    model_requests_per_minute: int | None = Field(
        None, ge=1, validation_alias=_env("LLM_BOT_MODEL_REQUESTS_PER_MINUTE")
    )
    model_tokens_per_minute: int | None = Field(
        None, ge=1, validation_alias=_env("LLM_BOT_MODEL_TOKENS_PER_MINUTE")
    )
    lease_seconds: float = Field(15.0, ge=1, validation_alias=_env("LLM_BOT_LEASE_SECONDS"))
    delivery_limit: int = Field(20, ge=1, validation_alias=_env("LLM_BOT_DELIVERY_LIMIT"))
    shutdown_grace_seconds: float = Field(
        20.0, ge=0, validation_alias=_env("LLM_BOT_SHUTDOWN_GRACE_SECONDS")
    )
    http_port: int = Field(9464, ge=0, le=65535, validation_alias=_env("LLM_BOT_HTTP_PORT"))
    http_host: str = Field("0.0.0.0", min_length=1, validation_alias=_env("LLM_BOT_HTTP_HOST"))  # noqa: S104  # probes reach the pod's IP

    importance_threshold: float = Field(
        0.5, ge=0.0, le=1.0, validation_alias=_env("LLM_BOT_IMPORTANCE_THRESHOLD")
    )
    ltm_max_items: int = Field(1000, ge=1, validation_alias=_env("LLM_BOT_LTM_MAX_ITEMS"))
    ltm_retention_days: int = Field(365, ge=1, validation_alias=_env("LLM_BOT_LTM_RETENTION_DAYS"))
    tools_path: Path | None = Field(None, validation_alias=_env("LLM_BOT_TOOLS_PATH"))
    personas_path: Path | None = Field(None, validation_alias=_env("LLM_BOT_PERSONAS_PATH"))
    stream_interval_ms: int = Field(
        40, ge=0, le=1000, validation_alias=_env("LLM_BOT_STREAM_INTERVAL_MS")
    )
    flow_ttl_seconds: int = Field(86_400, ge=1, validation_alias=_env("LLM_BOT_FLOW_TTL_SECONDS"))
    max_tool_rounds: int = Field(5, ge=1, le=50, validation_alias=_env("LLM_BOT_MAX_TOOL_ROUNDS"))
    tool_result_timeout_seconds: float = Field(
        120, gt=0, validation_alias=_env("LLM_BOT_TOOL_RESULT_TIMEOUT_SECONDS")
    )
    profile_retention_days: int = Field(
        365, ge=1, validation_alias=_env("LLM_BOT_PROFILE_RETENTION_DAYS")
    )

    embeddings: Literal["local", "openai", "off"] = Field(
        "local", validation_alias=_env("LLM_BOT_EMBEDDINGS")
    )
    embedding_model: str | None = Field(None, validation_alias=_env("LLM_BOT_EMBEDDING_MODEL"))
    embedding_dimensions: int | None = Field(
        None, ge=8, validation_alias=_env("LLM_BOT_EMBEDDING_DIMENSIONS")
    )
    embedding_base_url: str | None = Field(
        None, validation_alias=_env("LLM_BOT_EMBEDDING_BASE_URL")
    )
    retrieval_min_score: float = Field(
        0.45, ge=-1.0, le=1.0, validation_alias=_env("LLM_BOT_RETRIEVAL_MIN_SCORE")
    )
    topic_similarity: float = Field(
        0.85, ge=0.0, le=1.0, validation_alias=_env("LLM_BOT_TOPIC_SIMILARITY")
    )
    retrieval_max_items: int | None = Field(
        None, ge=1, le=1000, validation_alias=_env("LLM_BOT_RETRIEVAL_MAX_ITEMS")
    )
    retrieval_max_tokens: int = Field(
        4000, ge=1, validation_alias=_env("LLM_BOT_RETRIEVAL_MAX_TOKENS")
    )
    retrieval_timeout_ms: int = Field(
        50, ge=1, le=60_000, validation_alias=_env("LLM_BOT_RETRIEVAL_TIMEOUT_MS")
    )
    retrieval_load_timeout_ms: int = Field(
        1000, ge=1, le=60_000, validation_alias=_env("LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS")
    )
    retrieval_cache_entries: int = Field(
        200_000, ge=0, validation_alias=_env("LLM_BOT_RETRIEVAL_CACHE_ENTRIES")
    )
    retrieval_cache_mb: int = Field(512, ge=0, validation_alias=_env("LLM_BOT_RETRIEVAL_CACHE_MB"))
    qdrant_url: str | None = Field(None, validation_alias=_env("QDRANT_URL"))
    qdrant_api_key: SecretStr | None = Field(None, validation_alias=_env("QDRANT_API_KEY"))

    gateway_host: str = Field(
        "0.0.0.0",  # noqa: S104  # clients and probes reach the pod's IP
        min_length=1,
        validation_alias=_env("LLM_BOT_GATEWAY_HOST"),
    )
    gateway_port: int = Field(8000, ge=0, le=65535, validation_alias=_env("LLM_BOT_GATEWAY_PORT"))
    gateway_keys: str = Field("", validation_alias=_env("LLM_BOT_GATEWAY_KEYS"))
    gateway_token_secrets: SecretStr = Field(
        SecretStr(""), validation_alias=_env("LLM_BOT_GATEWAY_TOKEN_SECRETS")
    )
    gateway_token_audience: str | None = Field(
        None, validation_alias=_env("LLM_BOT_GATEWAY_TOKEN_AUDIENCE")
    )
    gateway_token_issuer: str | None = Field(
        None, validation_alias=_env("LLM_BOT_GATEWAY_TOKEN_ISSUER")
    )
    gateway_token_max_ttl_seconds: int = Field(
        3600, ge=1, validation_alias=_env("LLM_BOT_GATEWAY_TOKEN_MAX_TTL_SECONDS")
    )
    gateway_tenant_personas: str = Field(
        "", validation_alias=_env("LLM_BOT_GATEWAY_TENANT_PERSONAS")
    )
    gateway_max_connections: int = Field(
        1000, ge=1, validation_alias=_env("LLM_BOT_GATEWAY_MAX_CONNECTIONS")
    )
    gateway_timeout_seconds: float = Field(
        60.0, gt=0, validation_alias=_env("LLM_BOT_GATEWAY_TIMEOUT_SECONDS")
    )
    gateway_key_requests_per_minute: int = Field(
        600, ge=0, validation_alias=_env("LLM_BOT_GATEWAY_KEY_REQUESTS_PER_MINUTE")
    )
    gateway_user_requests_per_minute: int = Field(
        60, ge=0, validation_alias=_env("LLM_BOT_GATEWAY_USER_REQUESTS_PER_MINUTE")
    )
    gateway_key_max_in_flight: int = Field(
        100, ge=0, validation_alias=_env("LLM_BOT_GATEWAY_KEY_MAX_IN_FLIGHT")
    )
    gateway_user_max_in_flight: int = Field(
        4, ge=0, validation_alias=_env("LLM_BOT_GATEWAY_USER_MAX_IN_FLIGHT")
    )
    gateway_max_connections_per_address: int = Field(
        100, ge=0, validation_alias=_env("LLM_BOT_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS")
    )
    auth_max_failures: int = Field(10, ge=0, validation_alias=_env("LLM_BOT_AUTH_MAX_FAILURES"))
    auth_failure_window_seconds: float = Field(
        60.0, gt=0, validation_alias=_env("LLM_BOT_AUTH_FAILURE_WINDOW_SECONDS")
    )
    auth_lockout_seconds: float = Field(
        30.0, gt=0, validation_alias=_env("LLM_BOT_AUTH_LOCKOUT_SECONDS")
    )
    gateway_models: str = Field(
        "llm-bot", min_length=1, validation_alias=_env("LLM_BOT_GATEWAY_MODELS")
    )
    inspector_host: str = Field(
        "127.0.0.1", min_length=1, validation_alias=_env("LLM_BOT_INSPECTOR_HOST")
    )
    inspector_port: int = Field(
        8081, ge=0, le=65535, validation_alias=_env("LLM_BOT_INSPECTOR_PORT")
    )
    inspector_keys: str = Field("", validation_alias=_env("LLM_BOT_INSPECTOR_KEYS"))
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", validation_alias=_env("LLM_BOT_LOG_LEVEL")
    )
    log_format: Literal["json", "console"] = Field(
        "json", validation_alias=_env("LLM_BOT_LOG_FORMAT")
    )
    log_content: bool = Field(False, validation_alias=_env("LLM_BOT_LOG_CONTENT"))

    ingress_exchange: str = Field(
        "internal", min_length=1, validation_alias=_env("LLM_BOT_INGRESS_EXCHANGE")
    )
    ingress_routing_key: str = Field(
        "internal.llmbot.v1", min_length=1, validation_alias=_env("LLM_BOT_INGRESS_ROUTING_KEY")
    )
    ingress_queue: str = Field(
        "llm-bot.internal.llmbot.v1", min_length=1, validation_alias=_env("LLM_BOT_INGRESS_QUEUE")
    )
    ingress_partitions: int = Field(
        1, ge=1, le=32, validation_alias=_env("LLM_BOT_INGRESS_PARTITIONS")
    )
    """Ingress partitions: quorum queues with a single active consumer each, behind a
    consistent-hash exchange on the conversation when more than one (docs/deployment.md)."""
    candidate_routing_key: str = Field(
        "internal.candidate.v1",
        min_length=1,
        validation_alias=_env("LLM_BOT_CANDIDATE_ROUTING_KEY"),
    )
    error_routing_key: str = Field(
        "internal.llmbot.error.v1", min_length=1, validation_alias=_env("LLM_BOT_ERROR_ROUTING_KEY")
    )
    dlx: str = Field("internal.dlx", min_length=1, validation_alias=_env("LLM_BOT_DLX"))
    flow_result_routing_key: str = Field(
        "internal.flow.result.v1",
        min_length=1,
        validation_alias=_env("LLM_BOT_FLOW_RESULT_ROUTING_KEY"),
    )
    flow_result_queue: str = Field(
        "llm-bot.flow.result.v1", min_length=1, validation_alias=_env("LLM_BOT_FLOW_RESULT_QUEUE")
    )
    memory_routing_key: str = Field(
        "internal.memory.v1", min_length=1, validation_alias=_env("LLM_BOT_MEMORY_ROUTING_KEY")
    )
    memory_queue: str = Field(
        "llm-bot.memory.v1", min_length=1, validation_alias=_env("LLM_BOT_MEMORY_QUEUE")
    )
    memory_dlq: str = Field(
        "llm-bot.memory.v1.dlq", min_length=1, validation_alias=_env("LLM_BOT_MEMORY_DLQ")
    )
    dlq: str = Field(
        "llm-bot.internal.llmbot.v1.dlq", min_length=1, validation_alias=_env("LLM_BOT_DLQ")
    )

    @field_validator(
        "log_level",
        "log_format",
        "api",
        "embeddings",
        "prompt_cache_key",
        "redis_durability",
        mode="before",
    )
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("amqp_url")
    @classmethod
    def _amqp_url(cls, value: SecretStr) -> SecretStr:
        parse_amqp_url(value.get_secret_value())
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: SecretStr) -> SecretStr:
        parse_redis_url(value.get_secret_value())
        return value

    @field_validator("gateway_keys")
    @classmethod
    def _gateway_keys(cls, value: str) -> str:
        parse_key_entries(value)
        return value

    @field_validator("gateway_token_secrets")
    @classmethod
    def _gateway_token_secrets(cls, value: SecretStr) -> SecretStr:
        parse_token_secrets(value.get_secret_value())
        return value

    @field_validator("gateway_tenant_personas")
    @classmethod
    def _gateway_tenant_personas(cls, value: str) -> str:
        parse_tenant_personas(value)
        return value

    @field_validator("tenant_weights")
    @classmethod
    def _tenant_weights(cls, value: str) -> str:
        parse_tenant_weights(value)
        return value

    @field_validator("tenant_token_budgets")
    @classmethod
    def _tenant_token_budgets(cls, value: str) -> str:
        TenantTokenBudgets.parse(value)
        return value

    @field_validator("dedupe_ttl_seconds")
    @classmethod
    def _dedupe_within_trace(cls, value: int, info: ValidationInfo) -> int:
        # Forgetting a conversation finds its processed records (which hold the replies)
        # through the raw trace's event ids: the trace must outlive them.
        days = info.data.get("raw_trace_retention_days")
        if isinstance(days, int) and value > days * 86_400:
            raise ValueError(
                f"must not exceed LLM_BOT_RAW_TRACE_RETENTION_DAYS ({days} days = "
                f"{days * 86_400} s)"
            )
        return value

    @field_validator(
        "openai_base_url",
        "embedding_base_url",
        "qdrant_url",
        "provider_name",
        "tools_path",
        "personas_path",
        "gateway_token_audience",
        "gateway_token_issuer",
        mode="before",
    )
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value == "" else value
