"""The event handler: delivery in, outcome out. Knows nothing of aio-pika.

Events of one conversation are processed one at a time within this process (an
``asyncio.Lock`` per conversation); across processes the memory commit's version check
refuses a lost update.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog

from llm_bot.contract import InternalEventV2
from llm_bot.graph.builder import CompiledGraph
from llm_bot.graph.state import ChatEvent, GraphContext
from llm_bot.memory.working import ConversationKey
from llm_bot.service.erasure import Eraser
from llm_bot.service.outcomes import (
    Duplicate,
    EventIds,
    Outcome,
    Recorded,
    Replied,
    Skipped,
    outcome_for_error,
)
from llm_bot.service.parsing import parse_event, readable_ids

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Delivery:
    """A message as the broker handed it over, stripped of broker types."""

    body: bytes
    headers: Mapping[str, Any] = field(default_factory=dict)
    redelivered: bool = False


@dataclass
class _ConversationLocks:
    locks: dict[ConversationKey, asyncio.Lock] = field(default_factory=dict)
    users: dict[ConversationKey, int] = field(default_factory=dict)

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        lock = self.locks.setdefault(key, asyncio.Lock())
        self.users[key] = self.users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self.users[key] -= 1
            if self.users[key] == 0:
                del self.users[key]
                del self.locks[key]


class EventHandler:
    """Validates an event, routes it by type, runs the graph, names the outcome."""

    def __init__(
        self,
        *,
        graph: CompiledGraph,
        context: GraphContext,
        eraser: Eraser,
        max_body_bytes: int,
        log_content: bool,
    ) -> None:
        self._graph = graph
        self._context = context
        self._eraser = eraser
        self._max_body_bytes = max_body_bytes
        self._log_content = log_content
        self._locks = _ConversationLocks()

    async def handle(self, delivery: Delivery) -> Outcome:
        """Never raises: every failure becomes a ``DeadLetter`` outcome."""
        ids: EventIds | None = None
        try:
            event = parse_event(delivery.body, max_bytes=self._max_body_bytes)
            ids = EventIds(event.id, event.tenant_id, event.user_id, event.conversation_id)
            structlog.contextvars.bind_contextvars(
                event_id=event.id,
                tenant_id=event.tenant_id,
                conversation_id=event.conversation_id,
                event_type=event.type,
            )
            return await self._dispatch(event)
        except Exception as exc:  # the one place errors become outcomes
            if ids is None:
                ids = readable_ids(delivery.body, max_bytes=self._max_body_bytes)
            outcome = outcome_for_error(exc, ids=ids, attempts=1)
            log.warning(
                "event.failed",
                code=outcome.code,
                error=outcome.message,
                error_type=type(exc).__name__,
                exc_info=outcome.code == "internal",
            )
            return outcome

    async def _dispatch(self, event: InternalEventV2) -> Outcome:
        if event.type == "memory.forget":
            deleted = await self._eraser.forget(
                event.tenant_id, event.user_id, event.conversation_id
            )
            return Recorded(f"erased {deleted} keys")
        if event.type == "conversation.end":
            return Skipped("conversation.end: finalization runs in the memory worker")
        key = ConversationKey(event.tenant_id, event.user_id, event.conversation_id)
        command = ChatEvent(
            event_id=event.id,
            type=event.type,
            key=key,
            created_at=event.created_at,
            text=event.prompt_text(),
            lang=next((a.lang for a in event.annotations if a.kind == "prompt" and a.lang), None),
            tool=event.tool,
        )
        text_fields = {"text": command.text} if self._log_content else {}
        log.info("event.received", prompt_chars=len(command.text), **text_fields)
        async with self._locks.hold(key):
            state = await self._graph.ainvoke({"event": command}, context=self._context)
        route = state["route"]
        if route == "skip":
            return Skipped("no prompt text")
        if route == "duplicate":
            return Duplicate(state.get("candidate"))
        if route == "tool":
            return Recorded(f"{event.type} recorded in turn {state['turn']}")
        return Replied(state["candidate"])
