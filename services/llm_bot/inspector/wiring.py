"""The inspector's composition root: the service's own ports and adapters (bootstrap's
functions), a reply-path ``GraphContext`` for dry runs, and the inspector's own telemetry
(a private metrics registry: a dry run touches no metric of the reply path)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.auth_throttle import AuthThrottle, configured_throttle
from llm_bot.bootstrap import (
    Foundation,
    build_foundation,
    conversation_lease,
    graph_context,
    long_term_store,
    memory_store,
    personas,
    progress_store,
    redis_keys,
    utc_now,
    worker_indexer,
)
from llm_bot.config import ConfigurationError, InspectorConfig, Settings
from llm_bot.graph.state import GraphContext
from llm_bot.inspector.access_keys import InspectorKeys
from llm_bot.inspector.sessions import Sessions
from llm_bot.inspector.tenant_directory import RedisTenantDirectory
from llm_bot.service.fact_edits import FactEditor


class InspectorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.actions = Counter(
            "llmbot_inspector_actions",
            "Inspector actions (forget a conversation or user, remove or correct a fact, "
            "replay dead letters), by action and outcome (done, failed)",
            ["action", "outcome"],
            registry=registry,
        )


@dataclass
class Inspector:
    settings: Settings
    keys: InspectorKeys
    base: Foundation
    context: GraphContext
    store: RedisMemoryStore
    ltm: RedisLongTermStore
    directory: RedisTenantDirectory
    facts: FactEditor
    metrics: InspectorMetrics
    throttle: AuthThrottle
    """Failed logins per client address and key prefix (``LLM_BOT_AUTH_*``)."""
    sessions: Sessions = field(default_factory=Sessions)

    async def close(self) -> None:
        await self.base.close()


def inspector_keys(config: InspectorConfig) -> InspectorKeys:
    """The configured keys; ``ConfigurationError`` (one line) when none or malformed."""
    try:
        keys = InspectorKeys.parse(config.keys)
    except ValueError as exc:
        raise ConfigurationError(f"invalid configuration: LLM_BOT_INSPECTOR_KEYS: {exc}") from exc
    if not keys:
        raise ConfigurationError(
            "the inspector is off: set LLM_BOT_INSPECTOR_KEYS "
            "(make an entry with: llm-bot inspect hash-key --tenant T < key)"
        )
    return keys


def build_inspector(
    settings: Settings,
    *,
    keys: InspectorKeys | None = None,
    registry: CollectorRegistry | None = None,
) -> Inspector:
    """``keys``: the configured ones by default (``InspectorKeys()`` for the terminal's
    ``memory why``, which logs nobody in)."""
    keys = inspector_keys(settings.inspector) if keys is None else keys
    base = build_foundation(
        settings,
        tracer_provider=None,
        registry=CollectorRegistry(),  # the dry run's retriever counts here, never exported
        calls_model=False,  # it reads Redis; the dry run stops before the model call
    )
    store = memory_store(settings, base.redis)
    catalog = personas(settings.personas)
    context = graph_context(settings, base, store, catalog)
    ltm = long_term_store(settings, base.redis)
    metrics = InspectorMetrics(registry or CollectorRegistry())
    return Inspector(
        settings=settings,
        keys=keys,
        base=base,
        context=context,
        store=store,
        ltm=ltm,
        directory=RedisTenantDirectory(client=base.redis, keys=redis_keys(settings.redis)),
        facts=fact_editor(settings, base, ltm),
        metrics=metrics,
        throttle=configured_throttle(settings.inspector.auth, "inspector", metrics.registry),
    )


def fact_editor(settings: Settings, base: Foundation, ltm: RedisLongTermStore) -> FactEditor:
    """The worker's stores, lease and indexer (its metrics in the inspector's registry)."""
    progress = progress_store(settings, base.redis)
    indexer = worker_indexer(base, progress, ltm)
    return FactEditor(
        ltm=ltm,
        progress=progress,
        lease=conversation_lease(settings, base.redis),
        indexer=indexer,
        clock=utc_now,
    )
