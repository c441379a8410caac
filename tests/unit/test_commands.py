"""Every event type has a command of its own kind: checked, not hoped."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from llm_bot.contract import InternalEventV2
from llm_bot.contract.messages import EventType
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.commands import (
    COMMAND_FOR,
    Command,
    EndConversation,
    ForgetMemory,
    ImportTranscript,
    RecordToolCall,
    RecordToolResult,
    ReplyToMessage,
    command_for,
    missing,
)
from tests.support.events import message_event


def _event(event_type: str, **extra: Any) -> InternalEventV2:
    conversation = "*" if event_type == "memory.forget" else "c1"
    body = message_event(
        tenant="t", user="u", conversation=conversation, text="hi", event_type=event_type, **extra
    )
    return InternalEventV2.model_validate(body)


def test_every_event_type_has_a_command() -> None:
    assert set(COMMAND_FOR) == set(get_args(EventType))


def test_missing_names_what_a_table_lacks() -> None:
    chat = {ReplyToMessage, ImportTranscript, RecordToolCall, RecordToolResult}
    assert missing(chat, get_args(Command)) == ["ForgetMemory", "EndConversation"]
    assert missing(COMMAND_FOR, ("message", "flow.step")) == ["flow.step"]


def test_a_message_becomes_a_reply_command_with_its_prompt_and_key() -> None:
    command = command_for(_event("message"))
    assert isinstance(command, ReplyToMessage)
    assert (command.event_type, command.text, command.key) == (
        "message",
        "hi",
        ConversationKey("t", "u", "c1"),
    )


def test_forget_and_end_become_their_own_commands() -> None:
    event = _event("memory.forget")
    forget = command_for(event)
    assert forget == ForgetMemory("t", "u", "*", created_at=event.created_at)
    end = command_for(_event("conversation.end"))
    assert isinstance(end, EndConversation)
    assert end.event.type == "conversation.end"


@pytest.mark.parametrize(
    ("event_type", "kind"), [("tool.call", RecordToolCall), ("tool.result", RecordToolResult)]
)
def test_tool_events_become_their_own_commands_with_the_trace(
    event_type: str, kind: type[RecordToolCall | RecordToolResult]
) -> None:
    tool = {"tool_call_id": "call_1", "name": "lookup", "content": "ok"}
    command = command_for(_event(event_type, tool=tool))
    assert isinstance(command, kind)
    assert command.tool.tool_call_id == "call_1"
    assert command.event_type == event_type


def test_a_transcript_becomes_an_import_with_its_messages() -> None:
    transcript = [{"role": "user", "text": "earlier"}]
    command = command_for(_event("transcript", transcript=transcript))
    assert isinstance(command, ImportTranscript)
    assert [m.text for m in command.transcript] == ["earlier"]
