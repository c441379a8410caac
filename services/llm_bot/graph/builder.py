"""Wires the nodes into the compiled LangGraph graph."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from llm_bot.graph import nodes
from llm_bot.graph.state import GraphContext, GraphState

CompiledGraph = Any
"""``CompiledStateGraph``; its generic parameters add nothing for callers here."""

Update = dict[str, Any] | Command[str]
Node = Callable[[GraphState, Runtime[GraphContext]], Awaitable[Update]]


class TracedNode(Protocol):
    """A node as LangGraph calls it (``runtime`` by keyword)."""

    def __call__(
        self, state: GraphState, *, runtime: Runtime[GraphContext]
    ) -> Awaitable[Update]: ...


def traced(name: str, node: Node) -> TracedNode:
    """The node inside an INTERNAL span of its own name (child of the consumer span)."""

    async def run(state: GraphState, *, runtime: Runtime[GraphContext]) -> Update:
        with runtime.context.tracer.start_as_current_span(
            name, attributes={"llmbot.graph.node": name}
        ):
            return await node(state, runtime)

    run.__name__ = name
    return run


def build_graph(*, flows: bool = False) -> CompiledGraph:
    """``ingest → recall → call_model → build_candidate → remember`` with SKIP, duplicate
    and tool-trace shortcuts (``ingest`` and ``recall`` return ``Command(goto=...)``).

    ``flows``: some persona runs a flow; then ``supervisor`` takes ``ingest``'s place: it
    routes each event to the memory chat (``recall → call_model → ...``, as ``ingest``
    would) or to the conversation's flow (``recall → flow → build_candidate →
    remember``). Without flows there is nothing to choose between."""
    graph = StateGraph(GraphState, context_schema=GraphContext)
    if flows:
        entry = "supervisor"
        graph.add_node(entry, traced(entry, nodes.supervisor), destinations=nodes.INGEST_NEXT)
        graph.add_node("flow", traced("flow", nodes.flow))
        graph.add_edge("flow", "build_candidate")
    else:
        entry = "ingest"
        graph.add_node(entry, traced(entry, nodes.ingest), destinations=nodes.INGEST_NEXT)
    after_recall = nodes.FLOW_RECALL_NEXT if flows else nodes.RECALL_NEXT
    graph.add_node("recall", traced("recall", nodes.recall), destinations=after_recall)
    for name, node in (
        ("call_model", nodes.call_model),
        ("build_candidate", nodes.build_candidate),
        ("remember", nodes.remember),
    ):
        graph.add_node(name, traced(name, node))
    graph.add_edge(START, entry)
    graph.add_edge("call_model", "build_candidate")
    graph.add_edge("build_candidate", "remember")
    graph.add_edge("remember", END)
    return graph.compile(name="llm-bot")
