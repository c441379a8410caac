"""InternalEventV2 events built for the caller, validated by the contract the service uses
(``contract/validation.py``): a bad event fails here with the reason the service's ErrorV1
would give, before anything is published."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_bot.contract import (
    CandidateToolCall,
    InternalEventV2,
    ToolDefinition,
    TranscriptMessage,
)
from llm_bot.contract.messages import MAX_TRANSCRIPT_MESSAGES
from llm_bot.contract.validation import validate_event

SCHEMA = "internal.event.v2"


@dataclass(frozen=True, slots=True)
class Conversation:
    """Whose conversation an event belongs to: tenant, user and conversation ids."""

    tenant: str
    user: str
    conversation: str


def new_event_id(prefix: str = "evt") -> str:
    """A fresh event id: a reused one is answered as a duplicate (the stored reply)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def event(
    kind: str,
    where: Conversation,
    *,
    event_id: str | None = None,
    source: str | None = "llm-bot-client",
    **fields: Any,
) -> InternalEventV2:
    """An event of type ``kind`` with ``fields`` (``annotations``, ``tool``, ``tools``,
    ``transcript``, ``metadata``...), validated: ``EventInvalid`` when the service would
    refuse it."""
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "id": event_id or new_event_id(),
        "type": kind,
        "tenant_id": where.tenant,
        "user_id": where.user,
        "conversation_id": where.conversation,
        "created_at": datetime.now(UTC).isoformat(),
        **{name: value for name, value in fields.items() if value is not None},
    }
    if source is not None:
        data["source"] = {"platform": source}
    return validate_event(json.dumps(_plain(data)))


def message(
    text: str,
    where: Conversation,
    *,
    event_id: str | None = None,
    tools: Sequence[ToolDefinition | Mapping[str, Any]] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> InternalEventV2:
    """A user message (one ``prompt`` annotation), optionally offering ``tools``."""
    return event(
        "message",
        where,
        event_id=event_id,
        annotations=[{"kind": "prompt", "text": text}],
        tools=list(tools) if tools is not None else None,
        metadata=dict(metadata) if metadata is not None else None,
    )


def tool_result(
    call: CandidateToolCall, result: object, where: Conversation, *, event_id: str | None = None
) -> InternalEventV2:
    """The ``tool.result`` answering ``call``; a result that is not a string is sent as JSON."""
    content = result if isinstance(result, str) else json.dumps(result)
    return event(
        "tool.result",
        where,
        event_id=event_id,
        tool={"tool_call_id": call.id, "name": call.name, "content": content},
    )


def transcripts(
    messages: Sequence[TranscriptMessage | Mapping[str, Any]],
    where: Conversation,
    *,
    event_id: str | None = None,
) -> list[InternalEventV2]:
    """``transcript`` events importing ``messages`` in order, at most 500 per event (ids
    ``<event_id>.<n>`` when ``event_id`` is given, so a re-import is deduplicated)."""
    base = event_id or new_event_id("imp")
    chunks = [
        list(messages[start : start + MAX_TRANSCRIPT_MESSAGES])
        for start in range(0, len(messages), MAX_TRANSCRIPT_MESSAGES)
    ] or [[]]  # no message: the contract's own error (transcript: at least 1 item)
    return [
        event("transcript", where, event_id=f"{base}.{n}", transcript=chunk)
        for n, chunk in enumerate(chunks)
    ]


def forget(tenant: str, user: str, conversation: str = "*") -> InternalEventV2:
    """``memory.forget``: erase the user's memory in the tenant (``*``: every conversation)."""
    return event("memory.forget", Conversation(tenant, user, conversation))


def _plain(value: Any) -> Any:
    """Contract models (a ``TranscriptMessage``, a ``ToolDefinition``) as JSON data."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
