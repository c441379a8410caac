"""Wires the nodes into the compiled LangGraph graph."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from llm_bot.graph import nodes
from llm_bot.graph.state import GraphContext, GraphState

CompiledGraph = Any
"""``CompiledStateGraph``; its generic parameters add nothing for callers here."""


def _after_ingest(state: GraphState) -> str:
    return END if state["route"] == "skip" else "recall"


def _after_recall(state: GraphState) -> str:
    route = state["route"]
    if route == "duplicate":
        return END
    return "remember" if route == "tool" else "call_model"


def build_graph() -> CompiledGraph:
    """``ingest → recall → call_model → build_candidate → remember`` with SKIP, duplicate
    and tool-trace shortcuts."""
    graph = StateGraph(GraphState, context_schema=GraphContext)
    graph.add_node("ingest", nodes.ingest)
    graph.add_node("recall", nodes.recall)
    graph.add_node("call_model", nodes.call_model)
    graph.add_node("build_candidate", nodes.build_candidate)
    graph.add_node("remember", nodes.remember)
    graph.add_edge(START, "ingest")
    graph.add_conditional_edges("ingest", _after_ingest, ["recall", END])
    graph.add_conditional_edges("recall", _after_recall, ["call_model", "remember", END])
    graph.add_edge("call_model", "build_candidate")
    graph.add_edge("build_candidate", "remember")
    graph.add_edge("remember", END)
    return graph.compile(name="llm-bot")
