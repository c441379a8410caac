"""Each event type becomes one typed command; one table says which, checked at import.

Adding an event type to the contract (``EventType``) without a command here fails at import,
in every process and every test run, instead of at the first such event. The handler then
routes commands through its own table, checked against ``Command`` the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from llm_bot.contract import InternalEventV2, ToolTrace, TranscriptMessage
from llm_bot.contract.messages import EventType
from llm_bot.errors import InvalidEvent
from llm_bot.memory.working import ConversationKey
from llm_bot.ports import ToolSpec


@dataclass(frozen=True)
class ChatEvent:
    """The command the graph runs on: a validated ``message``, ``transcript`` or ``tool.*``
    event."""

    event_id: str
    type: Literal["message", "transcript", "tool.call", "tool.result"]
    key: ConversationKey
    created_at: datetime
    text: str = ""
    lang: str | None = None
    tool: ToolTrace | None = None
    transcript: tuple[TranscriptMessage, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    """Tools offered to the model with this message (Chat Completions definitions)."""
    reply_to: str | None = None
    """Where the reply streams (the delivery's AMQP ``reply_to``), or None."""
    persona: str | None = None
    """The persona ``metadata.persona`` asks for (SPEC 5.10), or None."""


@dataclass(frozen=True)
class ForgetMemory:
    """``memory.forget``: erase the user's memory (``conversation_id`` ``*``: all of it)."""

    tenant_id: str
    user_id: str
    conversation_id: str


@dataclass(frozen=True)
class EndConversation:
    """``conversation.end``: queue the conversation's finalization for the memory worker."""

    event: InternalEventV2


Command = ChatEvent | ForgetMemory | EndConversation
"""What an event asks for. ``ChatEvent`` (message, transcript, tool.*) runs the graph."""


def _chat_event(event: InternalEventV2) -> ChatEvent:
    if event.type not in ("message", "transcript", "tool.call", "tool.result"):
        raise TypeError(f"{event.type} is not a chat event")
    return ChatEvent(
        event_id=event.id,
        type=event.type,
        key=ConversationKey(event.tenant_id, event.user_id, event.conversation_id),
        created_at=event.created_at,
        text=event.prompt_text(),
        lang=next((a.lang for a in event.annotations if a.kind == "prompt" and a.lang), None),
        tool=event.tool,
        transcript=tuple(event.transcript or ()),
        tools=tuple(tool.for_chat() for tool in event.tools or ()),
        persona=_persona(event),
    )


def _persona(event: InternalEventV2) -> str | None:
    """``metadata.persona``: the persona the event asks for (SPEC 5.10), or None."""
    persona = event.metadata.get("persona")
    if persona is None or isinstance(persona, str):
        return persona
    raise InvalidEvent("metadata.persona: must be a string (a persona's name)")


def _forget(event: InternalEventV2) -> ForgetMemory:
    return ForgetMemory(event.tenant_id, event.user_id, event.conversation_id)


COMMAND_FOR: Mapping[EventType, Callable[[InternalEventV2], Command]] = {
    "message": _chat_event,
    "transcript": _chat_event,
    "tool.call": _chat_event,
    "tool.result": _chat_event,
    "memory.forget": _forget,
    "conversation.end": EndConversation,
}


def command_for(event: InternalEventV2) -> Command:
    """The command of a validated event."""
    return COMMAND_FOR[event.type](event)


def missing(handled: object, expected: tuple[object, ...]) -> list[str]:
    """Names in ``expected`` that ``handled`` (a collection) lacks."""
    present = set(handled)  # type: ignore[call-overload]
    return [getattr(item, "__name__", str(item)) for item in expected if item not in present]


_unmapped = missing(COMMAND_FOR, get_args(EventType))
if _unmapped:
    raise TypeError(f"event types without a command in COMMAND_FOR: {', '.join(_unmapped)}")
