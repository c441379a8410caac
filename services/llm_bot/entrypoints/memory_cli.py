"""``llm-bot memory show|forget``: inspect and erase memory from the command line."""

from __future__ import annotations

import json
from typing import Any

from llm_bot.bootstrap import memory_store, redis_client
from llm_bot.config import Settings
from llm_bot.memory.working import ConversationKey
from llm_bot.service.erasure import Eraser


async def show_memory(settings: Settings, key: ConversationKey) -> dict[str, Any]:
    """Working memory and raw trace of one conversation, as plain data."""
    client = redis_client(settings)
    try:
        store = memory_store(settings, client)
        memory = await store.working_memory(key)
        trace = await store.raw_trace(key)
        recalled = await store.load(key, "show")
    finally:
        await client.aclose()
    return {
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": key.conversation_id,
        "last_turn": recalled.last_turn,
        "version": recalled.version,
        "working_memory": memory.model_dump(mode="json") if memory else None,
        "raw_trace": [m.model_dump(mode="json", exclude_defaults=True) for m in trace],
    }


def render_memory(data: dict[str, Any]) -> str:
    """A human-readable view: window, summary, pending compaction, raw-trace size."""
    lines = [
        f"conversation {data['tenant_id']}/{data['user_id']}/{data['conversation_id']}"
        f"  last turn {data['last_turn']}  version {data['version']}"
    ]
    memory = data["working_memory"]
    if memory is None:
        lines.append("working memory: (none: never written, expired or forgotten)")
    else:
        lines.append(f"working memory: {len(memory['messages'])} messages in the window")
        lines.extend(
            f"  [turn {m['turn']}.{m['seq']}] {m['role']}: {m['content']}"
            for m in memory["messages"]
        )
        lines.append(f"summary: {memory['summary'] or '(none)'}")
        lines.append(f"session: {json.dumps(memory['session'], ensure_ascii=False)}")
        lines.append(f"pending compaction: turns {memory['pending_compaction'] or '[]'}")
    lines.append(f"raw trace: {len(data['raw_trace'])} messages")
    return "\n".join(lines)


async def forget_memory(settings: Settings, tenant_id: str, user_id: str, conversation: str) -> int:
    client = redis_client(settings)
    try:
        return await Eraser(store=memory_store(settings, client)).forget(
            tenant_id, user_id, conversation
        )
    finally:
        await client.aclose()
