"""Building InternalEventV2 bodies for tests."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from llm_bot.memory.conversation_key import ConversationKey


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def message_event(
    *,
    tenant: str,
    user: str,
    conversation: str,
    text: str | None,
    event_id: str | None = None,
    event_type: str = "message",
    **extra: Any,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "schema": "internal.event.v2",
        "id": event_id or new_id("evt"),
        "type": event_type,
        "tenant_id": tenant,
        "user_id": user,
        "conversation_id": conversation,
        "created_at": datetime.now(UTC).isoformat(),
        "source": {"platform": "test", "channel": "dm"},
        "annotations": [] if text is None else [{"kind": "prompt", "text": text}],
    }
    event.update(extra)
    return event


def conversation_event(key: ConversationKey, text: str | None, **extra: Any) -> dict[str, Any]:
    """:func:`message_event` in the conversation ``key``."""
    return message_event(
        tenant=key.tenant_id,
        user=key.user_id,
        conversation=key.conversation_id,
        text=text,
        **extra,
    )


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode()
