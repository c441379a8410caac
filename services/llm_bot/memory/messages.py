"""Chat messages as the memory stores them (internal type, not a wire schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]

PromptMessage = dict[str, Any]
"""A Chat Completions message (``{"role": ..., "content": ...}``)."""


class ToolCall(BaseModel):
    """A tool invocation requested by the assistant."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(BaseModel):
    """One message of a conversation, numbered by turn and by sequence within it.

    ``id`` is unique within the conversation and makes appends idempotent.
    ``tool_calls`` is set on assistant messages that call tools; ``tool_call_id`` on the
    ``tool`` message carrying a result.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    role: Role
    content: str
    created_at: str
    turn: int = Field(ge=1)
    seq: int = Field(ge=0)
    event_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    """The speaker's display name (imported transcripts); memory only, never sent as the
    provider's ``name`` field."""
    recall: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """On a reply: how its recall ended when it went on without what it searched for
    (``timeout: index_load``, ``failed``), so the inspector shows the turn answered
    without memory; memory only, never sent to the model (not stored when None)."""

    def char_count(self) -> int:
        """Characters this message costs in the window (content plus tool payloads)."""
        return len(self.content) + sum(len(c.name) + len(c.arguments) for c in self.tool_calls)

    def to_openai(self) -> dict[str, Any]:
        """Chat Completions message dict."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message
