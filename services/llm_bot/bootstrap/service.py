"""The reply path's process (``llm-bot run``): the consumer, the handler, the reply graph,
the retriever and fair dispatch."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters.rabbit_replies import RabbitReplies
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_fair_queue import RedisFairQueue
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.bootstrap.foundation import Foundation, _Running, build_foundation
from llm_bot.bootstrap.parts import (
    conversation_lease,
    flow_runner,
    long_term_store,
    memory_store,
    personas,
    redis_keys,
    retry_policy,
    tool_round_schedule,
    utc_now,
)
from llm_bot.config import (
    RetrievalConfig,
    Settings,
)
from llm_bot.context_budget import ContextBudget
from llm_bot.delivery.consumer import EventConsumer
from llm_bot.delivery.fair_dispatch import Fairness
from llm_bot.graph.builder import build_graph
from llm_bot.graph.runner import GraphChatRunner
from llm_bot.graph.state import GraphContext
from llm_bot.memory.tokens import default_token_counter
from llm_bot.memory.window import WindowBounds
from llm_bot.service.erasure import Eraser
from llm_bot.service.fairness import TenantShares
from llm_bot.service.handler import EventHandler
from llm_bot.service.personas import PersonaCatalog
from llm_bot.service.retriever import RetrievalSettings, Retriever


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
