"""The LangGraph graph that runs flows (SPEC 5.10): one node, ``ask``, that waits for the
user's reply with ``interrupt()`` and, resumed with ``Command(resume=reply)``, reads it and
advances the flow (``progress.advance``); it loops until the flow ends. Its state lives in
the checkpointer it is compiled with, so a flow survives restarts and moves between
replicas.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from llm_bot.flows.answers import Answer, read_text
from llm_bot.flows.definitions import Flow, Question
from llm_bot.flows.progress import (
    FlowState,
    Reply,
    abandoned,
    advance,
    current_question,
    read_answer,
    realigned,
)

Interpret = Callable[[Question, str], Awaitable[Answer]]
"""Reads an ambiguous reply with the model's structured output."""

REDEFINED_TEXT = "This questionnaire has changed since we started, so let's stop here. Thank you!"
"""Said when the personas file no longer has the flow, or the question it waited on."""

CompiledFlowGraph = Any
"""``CompiledStateGraph``; its generic parameters add nothing for callers here."""


def build_flow_graph(
    flows: Mapping[str, Flow],
    checkpointer: BaseCheckpointSaver[str],
    interpret: Interpret | None = None,
) -> CompiledFlowGraph:
    """``ask`` ⟲ until the flow is no longer running. Started with a flow's opening state
    (``progress.opening``); resumed with ``{"event_id", "text", "at"}`` per reply."""

    async def ask(state: FlowState) -> FlowState:
        resumed: dict[str, str] = interrupt(state["prompt"])
        reply = Reply(**resumed)
        flow = flows.get(state["flow"])
        now = realigned(flow, state)
        if flow is None or now is None:
            return abandoned(state, reply, REDEFINED_TEXT)
        question = current_question(flow, now)
        answer = read_answer(question, reply.text) if question else read_text(reply.text)
        if answer.ambiguous and question is not None and interpret is not None:
            answer = await interpret(question, reply.text)
        return advance(flow, now, reply, answer)

    def next_step(state: FlowState) -> str:
        return "ask" if state["status"] == "running" else END

    graph = StateGraph(FlowState)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_conditional_edges("ask", next_step, ["ask", END])
    return graph.compile(checkpointer=checkpointer, name="llm-bot-flow")
