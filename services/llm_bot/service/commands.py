"""Each event type becomes one typed command; one table says which, checked at import.

Adding an event type to the contract (``EventType``) without a command here fails at import,
in every process and every test run, instead of at the first such event. The handler and
the reply graph then dispatch on the command's class with ``match`` and ``assert_never``:
mypy refuses a command kind some dispatch forgot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, get_args

from llm_bot.contract import InternalEventV2, ToolTrace, TranscriptMessage
from llm_bot.contract.messages import EventType
from llm_bot.errors import InvalidEvent
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ToolSpec

ChatEventType = Literal["message", "transcript", "tool.call", "tool.result"]
"""The event kinds of a conversation: each runs the reply graph."""


@dataclass(frozen=True, kw_only=True)
class ChatCommand:
    """What every event of a conversation carries (the base of the four chat commands)."""

    event_type: ClassVar[ChatEventType]
    """The contract's name for the command's event kind (for logs and outcome reasons)."""

    event_id: str
    key: ConversationKey
    created_at: datetime
    lang: str | None = None
    """The language of the event's prompt annotation, when it names one."""
    reply_to: str | None = None
    """Where the reply streams (the delivery's AMQP ``reply_to``), or None."""
    persona: str | None = None
    """The persona ``metadata.persona`` asks for (SPEC 5.10), or None."""


@dataclass(frozen=True, kw_only=True)
class ReplyToMessage(ChatCommand):
    """``message``: answer the user's prompt (or SKIP it when it has no text)."""

    event_type: ClassVar[ChatEventType] = "message"
    text: str = ""
    tools: tuple[ToolSpec, ...] = ()
    """Tools offered to the model with this message (Chat Completions definitions)."""


@dataclass(frozen=True, kw_only=True)
class ImportTranscript(ChatCommand):
    """``transcript``: record an earlier conversation's messages, in order; no reply."""

    event_type: ClassVar[ChatEventType] = "transcript"
    transcript: tuple[TranscriptMessage, ...]


@dataclass(frozen=True, kw_only=True)
class RecordToolCall(ChatCommand):
    """``tool.call``: record a call the client's own model made; no reply."""

    event_type: ClassVar[ChatEventType] = "tool.call"
    tool: ToolTrace


@dataclass(frozen=True, kw_only=True)
class RecordToolResult(ChatCommand):
    """``tool.result``: record a tool's result; the last of a round continues the turn."""

    event_type: ClassVar[ChatEventType] = "tool.result"
    tool: ToolTrace


ChatEvent = ReplyToMessage | ImportTranscript | RecordToolCall | RecordToolResult
"""The commands the reply graph runs on, one per event kind of a conversation."""


@dataclass(frozen=True)
class ForgetMemory:
    """``memory.forget``: erase the user's memory (``conversation_id`` ``*``: all of it)."""

    tenant_id: str
    user_id: str
    conversation_id: str
    created_at: datetime | None = None
    """When the ``memory.forget`` was made: the user's events made until then are erased
    even when they are processed after it."""


@dataclass(frozen=True)
class EndConversation:
    """``conversation.end``: queue the conversation's finalization for the memory worker."""

    event: InternalEventV2


Command = ChatEvent | ForgetMemory | EndConversation
"""What an event asks for. The chat commands (``ChatEvent``) run the reply graph."""


def _common(event: InternalEventV2) -> dict[str, Any]:
    """The fields every chat command takes from its event."""
    return {
        "event_id": event.id,
        "key": ConversationKey(event.tenant_id, event.user_id, event.conversation_id),
        "created_at": event.created_at,
        "lang": next((a.lang for a in event.annotations if a.kind == "prompt" and a.lang), None),
        "persona": _persona(event),
    }


def _message(event: InternalEventV2) -> ReplyToMessage:
    return ReplyToMessage(
        text=event.prompt_text(),
        tools=tuple(tool.for_chat() for tool in event.tools or ()),
        **_common(event),
    )


def _transcript(event: InternalEventV2) -> ImportTranscript:
    return ImportTranscript(transcript=tuple(event.transcript or ()), **_common(event))


def _tool_call(event: InternalEventV2) -> RecordToolCall:
    return RecordToolCall(tool=_tool(event), **_common(event))


def _tool_result(event: InternalEventV2) -> RecordToolResult:
    return RecordToolResult(tool=_tool(event), **_common(event))


def _tool(event: InternalEventV2) -> ToolTrace:
    if event.tool is None:  # the contract refuses such an event (it never gets here)
        raise InvalidEvent(f"{event.type} events need a 'tool' object")
    return event.tool


def _persona(event: InternalEventV2) -> str | None:
    """``metadata.persona``: the persona the event asks for (SPEC 5.10), or None."""
    persona = event.metadata.get("persona")
    if persona is None or isinstance(persona, str):
        return persona
    raise InvalidEvent("metadata.persona: must be a string (a persona's name)")


def _forget(event: InternalEventV2) -> ForgetMemory:
    return ForgetMemory(
        event.tenant_id, event.user_id, event.conversation_id, created_at=event.created_at
    )


COMMAND_FOR: Mapping[EventType, Callable[[InternalEventV2], Command]] = {
    "message": _message,
    "transcript": _transcript,
    "tool.call": _tool_call,
    "tool.result": _tool_result,
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
