"""What an event does to the conversation's round of tool calls (SPEC 5.9), and the
worker's timeout schedule kept in step with the open round.

A user message closes the open round (its calls get "no result"); a tool result for an
open call answers it and, when it was the last, continues the turn (the model is called
again, with the turn's tools until ``max_rounds`` rounds were done); a result for a call
already answered changes nothing; one for an unknown call is only recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from llm_bot.graph.turn_messages import next_seq, numbered
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tool_rounds import ToolRound, closing_messages
from llm_bot.memory.working import Recalled
from llm_bot.ports import ConversationSchedule, ToolSpec
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent, RecordToolResult, ReplyToMessage
from llm_bot.service.personas import Persona


@dataclass(frozen=True)
class ToolStep:
    """What an event does to the conversation's tool round."""

    route: Route
    tool_round: ToolRound | None
    tools: tuple[ToolSpec, ...] = ()
    rounds_done: int = 0
    closing: tuple[ChatMessage, ...] = ()
    """"No result" tool messages closing the open calls before a new user message."""


def turn_start(
    route: Route, event: ChatEvent, recalled: Recalled, persona: Persona, *, max_rounds: int
) -> tuple[ToolStep, list[ChatMessage]]:
    """The event's step in the tool round and the messages it adds to the window (the
    closing "no result" messages first). ``recall`` and the inspector's dry run use it."""
    asked = event.tools if isinstance(event, ReplyToMessage) else ()
    step = tool_step(route, event, recalled, max_rounds, persona.tools.for_message(asked))
    if step.route == Route.TOOL_DUPLICATE:
        return step, []
    return step, [*step.closing, *numbered(event, recalled)]


def tool_step(
    route: Route,
    event: ChatEvent,
    recalled: Recalled,
    max_rounds: int,
    offered: tuple[ToolSpec, ...],
) -> ToolStep:
    """The step of ``event`` on the round ``recalled`` holds (see the module's rules)."""
    current = recalled.memory.tool_round
    if route in (Route.REPLY, Route.FLOW):
        if current is None or current.complete():
            return ToolStep(route, None, tools=offered)
        closing = closing_messages(
            current,
            event_id=event.event_id,
            next_seq=next_seq(recalled),
            created_at=event.created_at.isoformat(),
            reason="user_moved_on",
        )
        return ToolStep(route, None, tools=offered, closing=tuple(closing))
    if not isinstance(event, RecordToolResult):
        return ToolStep(route, current)
    call_id = event.tool.tool_call_id
    if any(m.role == "tool" and m.tool_call_id == call_id for m in recalled.memory.messages):
        return ToolStep(Route.TOOL_DUPLICATE, current)  # answered already, in this round or before
    if current is None:
        return ToolStep(route, current)
    return _answered(route, current, call_id, max_rounds)


def _answered(route: Route, current: ToolRound, call_id: str, max_rounds: int) -> ToolStep:
    """The step of a tool result for ``call_id`` while ``current`` is open."""
    if call_id in current.answered:
        return ToolStep(Route.TOOL_DUPLICATE, current)
    if call_id not in current.calls:
        return ToolStep(route, current)
    answered = current.answer(call_id)
    if not answered.complete():
        return ToolStep(route, answered)
    tools = answered.tools if answered.round < max_rounds else ()
    return ToolStep(Route.CONTINUE, None, tools=tools, rounds_done=answered.round)


@dataclass(frozen=True)
class RoundDeadlines:
    """Keeps the worker's timeout schedule in step with a conversation's open round."""

    scheduler: ConversationSchedule | None
    """None: rounds are scheduled nowhere (nothing times them out)."""
    timeout_seconds: float

    async def keep(
        self, key: ConversationKey, before: ToolRound | None, after: ToolRound | None
    ) -> None:
        """A round opened (``after`` open, not ``before``'s) is scheduled once; a round that
        closed is unscheduled."""
        if self.scheduler is None:
            return
        if after is not None and not after.complete():
            if before is None or before.opened_at != after.opened_at:
                opened = datetime.fromisoformat(after.opened_at).timestamp()
                await self.scheduler.schedule(key, opened + self.timeout_seconds)
        elif before is not None:
            await self.scheduler.unschedule(key)
