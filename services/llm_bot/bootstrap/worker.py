"""The memory worker's process (``llm-bot worker``): its jobs consumer, the indexer,
classifier, compactor and sweeps."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.bootstrap.foundation import Foundation, _Running, build_foundation
from llm_bot.bootstrap.parts import (
    conversation_lease,
    flow_runner,
    long_term_store,
    personas,
    progress_store,
    retry_policy,
    tool_round_schedule,
    utc_now,
)
from llm_bot.config import (
    Settings,
)
from llm_bot.delivery.consumer import EventConsumer
from llm_bot.service.classifier import MessageClassifier
from llm_bot.service.compactor import Compactor
from llm_bot.service.flow_expiry import FlowExpiry
from llm_bot.service.indexer import Indexer
from llm_bot.service.memory_jobs import MemoryJobHandler
from llm_bot.service.retention_sweep import RetentionSweep
from llm_bot.service.tool_timeouts import ToolTimeouts


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
