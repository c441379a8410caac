"""The messages an event adds to its conversation, numbered into turns: a message opens
the next turn, a tool trace joins the current one, a transcript is numbered message by
message (``memory/transcript.py``)."""

from __future__ import annotations

from typing import assert_never

from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.transcript import transcript_turns
from llm_bot.memory.working import Recalled
from llm_bot.service.commands import (
    ChatEvent,
    ImportTranscript,
    RecordToolCall,
    RecordToolResult,
    ReplyToMessage,
)


def next_seq(recalled: Recalled) -> int:
    """The next sequence number in the conversation's last turn."""
    loaded = recalled.memory.messages
    return 1 + max((m.seq for m in loaded if m.turn == recalled.last_turn), default=-1)


def numbered(event: ChatEvent, recalled: Recalled) -> list[ChatMessage]:
    """The event's messages, numbered after what ``recalled`` holds."""
    seq = next_seq(recalled)
    created_at = event.created_at.isoformat()
    match event:
        case ImportTranscript():
            return transcript_turns(
                event.event_id,
                event.transcript,
                last_turn=recalled.last_turn,
                next_seq=seq,
                created_at=event.created_at,
            )
        case ReplyToMessage():
            return [user_message(event, recalled.last_turn + 1, 0, created_at)]
        case RecordToolCall() | RecordToolResult():
            return [tool_message(event, max(recalled.last_turn, 1), seq, created_at)]
        case _:
            assert_never(event)


def tool_message(
    event: RecordToolCall | RecordToolResult, turn: int, seq: int, created_at: str
) -> ChatMessage:
    """The message a tool trace contributes to its turn: the call, or its result."""
    if isinstance(event, RecordToolCall):
        call = ToolCall(
            id=event.tool.tool_call_id,
            name=event.tool.name or "tool",
            arguments=event.tool.arguments,
        )
        return ChatMessage(
            id=f"{event.event_id}:call",
            role="assistant",
            content="",
            created_at=created_at,
            turn=turn,
            seq=seq,
            event_id=event.event_id,
            tool_calls=(call,),
        )
    return ChatMessage(
        id=f"{event.event_id}:result",
        role="tool",
        content=event.tool.content,
        created_at=created_at,
        turn=turn,
        seq=seq,
        event_id=event.event_id,
        tool_call_id=event.tool.tool_call_id,
    )


def user_message(event: ReplyToMessage, turn: int, seq: int, created_at: str) -> ChatMessage:
    """The user's message, opening its turn."""
    return ChatMessage(
        id=f"{event.event_id}:user",
        role="user",
        content=event.text,
        created_at=created_at,
        turn=turn,
        seq=seq,
        event_id=event.event_id,
    )
