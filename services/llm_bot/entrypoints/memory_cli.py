"""``llm-bot memory show|forget``: inspect and erase memory from the command line."""

from __future__ import annotations

import json
from typing import Any

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.bootstrap import (
    flow_runner,
    long_term_store,
    memory_store,
    personas,
    progress_store,
    recall_index,
    redis_client,
)
from llm_bot.config import Settings
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.erasure import Eraser


async def show_memory(settings: Settings, key: ConversationKey) -> dict[str, Any]:
    """Every tier, as plain data: the conversation's working memory, progress and raw
    trace, and the user's long-term memory (profile, facts, episodes, notable events)."""
    client = redis_client(settings.redis)
    try:
        store = memory_store(settings, client)
        ltm = long_term_store(settings, client)
        memory = await store.working_memory(key)
        trace = await store.raw_trace(key)
        recalled = await store.load(key, "show")
        progress = await progress_store(settings, client).load(key)
        flow = await _running_flow(settings, client, key)
        tenant, user = key.tenant_id, key.user_id
        long_term = {
            "profile": {k: a.value for k, a in sorted((await ltm.profile(tenant, user)).items())},
            "facts": [f.model_dump(mode="json") for f in await ltm.facts(tenant, user)],
            "episodes": [
                e.model_dump(mode="json")
                for e in sorted(
                    await ltm.episodes(tenant, user), key=lambda e: (e.created_at, e.turns)
                )
            ],
            "events": [
                e.model_dump(mode="json")
                for e in sorted(
                    await ltm.events(tenant, user), key=lambda e: (e.created_at, e.turn)
                )
            ],
        }
    finally:
        await client.aclose()
    return {
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": key.conversation_id,
        "last_turn": recalled.last_turn,
        "version": recalled.version,
        "compacted_through": progress.compacted_through,
        "classified_through": progress.classified_through,
        "working_memory": memory.model_dump(mode="json") if memory else None,
        "flow": flow,
        "raw_trace": [m.model_dump(mode="json", exclude_defaults=True) for m in trace],
        "long_term": long_term,
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
    lines.append(
        f"raw trace: {len(data['raw_trace'])} messages; compacted through turn "
        f"{data['compacted_through']}, classified through turn {data['classified_through']}"
    )
    flow = data.get("flow")
    if flow is not None:
        lines.append(
            f"flow: {flow['flow']} ({flow['status']}), started {flow['started_at'][:19]}, "
            f"last reply {flow['updated_at'][:19]}; waiting on: {flow['prompt']}"
        )
        lines.extend(
            f"  {a['question_id']} = {json.dumps(a['value'], ensure_ascii=False)} "
            f"(attempts {a['attempts']})"
            for a in flow["answers"]
        )
    lines.extend(_render_long_term(data["long_term"]))
    return "\n".join(lines)


def _render_long_term(ltm: dict[str, Any]) -> list[str]:
    lines = ["long-term memory (this user, every conversation):"]
    lines.append("  profile: " + (", ".join(f"{k}={v}" for k, v in ltm["profile"].items()) or "-"))
    lines.append(f"  facts ({len(ltm['facts'])}):")
    for fact in ltm["facts"]:
        sources = "; ".join(
            "operator"
            if s.get("provenance") == "operator"
            else f"{s['conversation_id']} turns {_span(s['turns'])}"
            for s in fact["sources"]
        )
        retired = fact.get("superseded_by")
        note = f"; superseded by {retired} on {fact['superseded_at'][:10]}" if retired else ""
        lines.append(
            f"    - {fact['fact']} (confidence {fact['confidence']}, from {sources}{note}; "
            f"id {fact['id']})"
        )
    lines.append(f"  episodes ({len(ltm['episodes'])}):")
    for episode in ltm["episodes"]:
        lines.append(
            f"    - {episode['created_at'][:10]} {episode['conversation_id']} turns "
            f"{_span(episode['turns'])}: {episode['summary']}"
        )
    lines.append(f"  notable events ({len(ltm['events'])}):")
    for event in ltm["events"]:
        lines.append(
            f"    - {event['created_at'][:10]} ({event['event_type']}, {event['importance']}) "
            f"turn {event['turn']}: {event['summary']}"
        )
    return lines


async def _running_flow(
    settings: Settings, client: RedisClient, key: ConversationKey
) -> dict[str, Any] | None:
    """The conversation's flow as checkpointed (``LLM_BOT_PERSONAS_PATH``'s flows), or None."""
    runner = flow_runner(settings, personas(settings.personas), client)
    if runner is None:
        return None
    state = await runner.state(key)
    if state is None:
        return None
    fields = ("flow", "status", "started_at", "updated_at", "prompt", "answers")
    return {name: state[name] for name in fields}  # type: ignore[literal-required]


def _span(turns: list[int]) -> str:
    return f"{turns[0]}-{turns[-1]}" if len(turns) > 1 else str(turns[0]) if turns else "-"


async def forget_memory(settings: Settings, tenant_id: str, user_id: str, conversation: str) -> int:
    client = redis_client(settings.redis)
    try:
        eraser = Eraser(
            store=memory_store(settings, client),
            ltm=long_term_store(settings, client),
            index=recall_index(settings, client),
        )
        return await eraser.forget(tenant_id, user_id, conversation)
    finally:
        await client.aclose()
