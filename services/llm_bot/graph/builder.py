"""Wires the nodes into the compiled LangGraph graph."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from llm_bot.graph import nodes
from llm_bot.graph.state import GraphContext, GraphState

CompiledGraph = Any
"""``CompiledStateGraph``; its generic parameters add nothing for callers here."""

Node = Callable[[GraphState, Runtime[GraphContext]], Awaitable[dict[str, Any]]]


class TracedNode(Protocol):
    """A node as LangGraph calls it (``runtime`` by keyword)."""

    def __call__(
        self, state: GraphState, *, runtime: Runtime[GraphContext]
    ) -> Awaitable[dict[str, Any]]: ...


def traced(name: str, node: Node) -> TracedNode:
    """The node inside an INTERNAL span of its own name (child of the consumer span)."""

    async def run(state: GraphState, *, runtime: Runtime[GraphContext]) -> dict[str, Any]:
        with runtime.context.tracer.start_as_current_span(
            name, attributes={"llmbot.graph.node": name}
        ):
            return await node(state, runtime)

    run.__name__ = name
    return run


# Routers are async: LangGraph runs sync ones in a thread pool (two thread hops an event).
async def _after_ingest(state: GraphState) -> str:
    return END if state["route"] == "skip" else "recall"


async def _after_recall(state: GraphState) -> str:
    route = state["route"]
    if route == "duplicate":
        return END
    return "remember" if route == "tool" else "call_model"


def build_graph() -> CompiledGraph:
    """``ingest → recall → call_model → build_candidate → remember`` with SKIP, duplicate
    and tool-trace shortcuts."""
    graph = StateGraph(GraphState, context_schema=GraphContext)
    for name, node in (
        ("ingest", nodes.ingest),
        ("recall", nodes.recall),
        ("call_model", nodes.call_model),
        ("build_candidate", nodes.build_candidate),
        ("remember", nodes.remember),
    ):
        graph.add_node(name, traced(name, node))
    graph.add_edge(START, "ingest")
    graph.add_conditional_edges("ingest", _after_ingest, ["recall", END])
    graph.add_conditional_edges("recall", _after_recall, ["call_model", "remember", END])
    graph.add_edge("call_model", "build_candidate")
    graph.add_edge("build_candidate", "remember")
    graph.add_edge("remember", END)
    return graph.compile(name="llm-bot")
