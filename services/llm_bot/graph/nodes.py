"""The graph's nodes as LangGraph calls them: each takes from the runtime context only the
collaborators its step uses, and hands them to the module that holds the step.

- routing (``ingest``, ``supervisor``): ``routing.py``
- ``recall`` (memory, turn numbering, retrieval): ``recall.py``, ``turn_messages.py``;
  a redelivered event's replay: ``duplicates.py``; the tool round: ``tool_rounds.py``
- ``call_model``: ``model_call.py``; ``flow``: ``flow_turns.py``
- ``build_candidate``: ``candidate.py``; ``remember``: ``commit.py``

Each returns only the state keys it changes; ``ingest``/``supervisor`` and ``recall``
choose the next node themselves (``Command(goto=...)``).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command

from llm_bot.graph import candidate, commit, model_call, routing
from llm_bot.graph import recall as recall_step
from llm_bot.graph.duplicates import DuplicateReplay
from llm_bot.graph.flow_turns import flow_reply
from llm_bot.graph.routing import FLOW_RECALL_NEXT, INGEST_NEXT, RECALL_NEXT
from llm_bot.graph.state import GraphContext, GraphState
from llm_bot.graph.tool_rounds import RoundDeadlines

Update = dict[str, Any]

__all__ = [
    "FLOW_RECALL_NEXT",
    "INGEST_NEXT",
    "RECALL_NEXT",
    "build_candidate",
    "call_model",
    "flow",
    "ingest",
    "recall",
    "remember",
    "supervisor",
]


async def supervisor(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Route each event to the persona's graph, without a model call (SPEC 5.10): to the
    conversation's flow, or to the memory chat as ``ingest`` routes it (this node takes
    ``ingest``'s place in a graph with flows, so routing costs no extra step)."""
    ctx = runtime.context
    return await routing.route_to_flow_or_chat(
        state["event"], personas=ctx.persona_catalog, flows=ctx.flows
    )


async def ingest(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Decide the route: SKIP a message without prompt text, record tool traces, reply."""
    return routing.route_event(state["event"])


async def recall(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Load working memory, number the turn, recall; route on (``recall.py``)."""
    ctx = runtime.context
    return await recall_step.recall_turn(
        state,
        memory=ctx.memory,
        personas=ctx.persona_catalog,
        retriever=ctx.retriever,
        bounds=ctx.bounds,
        max_tool_rounds=ctx.max_tool_rounds,
        metrics=ctx.metrics,
        replay=DuplicateReplay(ctx.clock, round_deadlines(ctx), ctx.flows),
    )


async def call_model(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Assemble the context from memory and the bounded window, and call the model."""
    ctx = runtime.context
    return await model_call.call_model(
        state,
        model=ctx.model,
        budget=ctx.budget,
        counter=ctx.counter,
        metrics=ctx.metrics,
        replies=ctx.replies,
        stream_interval=ctx.stream_interval_seconds,
    )


async def flow(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Apply the message to the conversation's flow (``flow_turns.py``)."""
    ctx = runtime.context
    assert ctx.flows is not None  # noqa: S101  # the route exists only with flows
    return await flow_reply(
        state,
        flows=ctx.flows,
        personas=ctx.persona_catalog,
        clock=ctx.clock,
        budget=ctx.budget,
        metrics=ctx.metrics,
        replies=ctx.replies,
        stream_interval=ctx.stream_interval_seconds,
    )


async def build_candidate(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """CandidateV1 from the assistant reply, and the reply appended to the window."""
    ctx = runtime.context
    return candidate.build_candidate(state, now=ctx.clock(), bounds=ctx.bounds, metrics=ctx.metrics)


async def remember(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Commit the bounded window, the raw trace and the processed record atomically."""
    ctx = runtime.context
    return await commit.commit_turn(
        state,
        memory=ctx.memory,
        bounds=ctx.bounds,
        clock=ctx.clock,
        deadlines=round_deadlines(ctx),
        metrics=ctx.metrics,
    )


def round_deadlines(ctx: GraphContext) -> RoundDeadlines:
    """The tool-round timeout schedule as the context configures it."""
    return RoundDeadlines(ctx.tool_rounds, ctx.tool_result_timeout_seconds)
