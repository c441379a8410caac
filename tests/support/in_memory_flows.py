"""Flows without Redis: ``FlowCheckpoints`` on LangGraph's ``InMemorySaver`` and a
schedule of deadlines in a dict, so ``FlowRunner`` (and the graph's ``flow`` and
``supervisor`` steps) run in unit tests as they run in production."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from llm_bot.memory.conversation_key import ConversationKey
from tests.support.in_memory import InMemoryErasures


class InMemoryFlowCheckpoints:
    """The ``FlowCheckpoints`` port: one checkpoint thread per conversation in memory,
    the user's erasure generation from ``erasures`` (shared with the memory store)."""

    def __init__(self, erasures: InMemoryErasures | None = None) -> None:
        self.erasures = erasures or InMemoryErasures()
        self._saver = InMemorySaver()

    @property
    def saver(self) -> BaseCheckpointSaver[str]:
        return self._saver

    def thread_id(self, key: ConversationKey) -> str:
        return f"{key.tenant_id}|{key.user_id}|{key.conversation_id}"

    async def exists(self, key: ConversationKey) -> bool:
        config: RunnableConfig = {"configurable": {"thread_id": self.thread_id(key)}}
        return await self._saver.aget_tuple(config) is not None

    async def delete(self, key: ConversationKey) -> None:
        await self._saver.adelete_thread(self.thread_id(key))

    async def erasure_generation(self, key: ConversationKey) -> str:
        return self.erasures.generation(key.tenant_id, key.user_id)


class InMemorySchedule:
    """Deadlines per conversation (``ports.ConversationSchedule``, the flows' and the tool
    rounds'): what the worker's sweeps read."""

    def __init__(self) -> None:
        self.deadlines: dict[ConversationKey, float] = {}

    async def schedule(self, key: ConversationKey, deadline: float) -> None:
        self.deadlines[key] = deadline

    async def unschedule(self, key: ConversationKey) -> None:
        self.deadlines.pop(key, None)

    async def unschedule_due(self, key: ConversationKey, now: float) -> None:
        if self.deadlines.get(key, float("inf")) <= now:
            del self.deadlines[key]

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]:
        ordered = sorted(self.deadlines.items(), key=lambda item: item[1])
        return [key for key, deadline in ordered if deadline <= now][:limit]
