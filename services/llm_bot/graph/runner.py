"""The reply graph as the handler's :class:`~llm_bot.service.chat_runs.ChatRunner`: one
compiled graph and its runtime context, wired by ``bootstrap``."""

from __future__ import annotations

from llm_bot.graph.builder import CompiledGraph
from llm_bot.graph.state import GraphContext
from llm_bot.service.chat_runs import ChatRun
from llm_bot.service.commands import ChatEvent


class GraphChatRunner:
    """Runs chat commands through ``graph`` with ``context`` (the LangGraph runtime)."""

    def __init__(self, *, graph: CompiledGraph, context: GraphContext) -> None:
        self._graph = graph
        self._context = context

    async def run(self, event: ChatEvent, lease_token: str | None) -> ChatRun:
        state = await self._graph.ainvoke(
            {"event": event, "lease_token": lease_token}, context=self._context
        )
        flow_turn = state.get("flow_turn")
        return ChatRun(
            route=state["route"],
            turn=state.get("turn"),
            candidate=state.get("candidate"),
            job=state.get("job"),
            flow_result=flow_turn.result if flow_turn is not None else None,
        )
