"""The messages an event adds to its conversation, numbered into turns: a message opens
the next turn, a tool trace joins the current one, a transcript is numbered message by
message (``memory/transcript.py``)."""

from __future__ import annotations

from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.transcript import transcript_turns
from llm_bot.memory.working import Recalled
from llm_bot.service.commands import ChatEvent


def next_seq(recalled: Recalled) -> int:
    """The next sequence number in the conversation's last turn."""
    loaded = recalled.memory.messages
    return 1 + max((m.seq for m in loaded if m.turn == recalled.last_turn), default=-1)


def numbered(event: ChatEvent, recalled: Recalled) -> list[ChatMessage]:
    """The event's messages, numbered after what ``recalled`` holds."""
    seq = next_seq(recalled)
    if event.type == "transcript":
        return transcript_turns(
            event.event_id,
            event.transcript,
            last_turn=recalled.last_turn,
            next_seq=seq,
            created_at=event.created_at,
        )
    if event.type == "message":
        turn, seq = recalled.last_turn + 1, 0
    else:
        turn = max(recalled.last_turn, 1)
    return [turn_message(event, turn, seq, event.created_at.isoformat())]


def turn_message(event: ChatEvent, turn: int, seq: int, created_at: str) -> ChatMessage:
    """The message a message or tool trace contributes to its turn."""
    if event.type == "tool.call" and event.tool is not None:
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
    if event.type == "tool.result" and event.tool is not None:
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
    return ChatMessage(
        id=f"{event.event_id}:user",
        role="user",
        content=event.text,
        created_at=created_at,
        turn=turn,
        seq=seq,
        event_id=event.event_id,
    )
