"""The inspector's view functions: each returns plain data (the JSON twin), which the
page's template renders. Every view receives ids already validated and allowed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from llm_bot.bootstrap import utc_now
from llm_bot.entrypoints.memory_cli import show_memory
from llm_bot.inspector.retention_horizon import retention_horizon
from llm_bot.inspector.why import dry_run
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import SemanticFact

PAGE_SIZE = 50


def _page(items: list[Any], page: int) -> tuple[list[Any], dict[str, Any]]:
    start = (page - 1) * PAGE_SIZE
    shown = items[start : start + PAGE_SIZE]
    return shown, {"page": page, "pages": max(1, -(-len(items) // PAGE_SIZE)), "total": len(items)}


async def tenant_view(inspector: Inspector, tenant_id: str, page: int) -> dict[str, Any]:
    """The tenant's users and conversations, newest activity first, paginated."""
    conversations = await inspector.directory.conversations(tenant_id)
    users = await inspector.directory.users(tenant_id)
    shown_users, user_pages = _page(users, page)
    shown_conversations, conversation_pages = _page(conversations, page)
    return {
        "tenant_id": tenant_id,
        "users": [
            {
                "user_id": u.user_id,
                "last_activity": u.last_activity,
                "conversations": u.conversations,
            }
            for u in shown_users
        ],
        "users_page": user_pages,
        "conversations": [
            {
                "user_id": c.key.user_id,
                "conversation_id": c.key.conversation_id,
                "last_activity": c.last_activity,
                "last_turn": c.last_turn,
            }
            for c in shown_conversations
        ],
        "conversations_page": conversation_pages,
    }


def _fact_history(facts: list[SemanticFact]) -> list[dict[str, Any]]:
    """Each fact with what it replaced (the facts superseded by it), importance first."""
    replaced: dict[str, list[SemanticFact]] = {}
    for fact in facts:
        if fact.superseded_by:
            replaced.setdefault(fact.superseded_by, []).append(fact)
    rows = []
    for fact in sorted(
        facts, key=lambda f: (f.superseded_by is not None, -f.salience * f.confidence, f.id)
    ):
        rows.append(
            {
                "id": fact.id,
                "value": fact.fact,
                "importance": round(fact.salience * fact.confidence, 4),
                "confidence": fact.confidence,
                "salience": fact.salience,
                "tags": list(fact.tags),
                "created_at": fact.created_at,
                "updated_at": fact.updated_at,
                "current": fact.superseded_by is None,
                "superseded_by": fact.superseded_by,
                "superseded_at": fact.superseded_at,
                "replaced": [
                    {"id": old.id, "value": old.fact, "superseded_at": old.superseded_at}
                    for old in replaced.get(fact.id, [])
                ],
                "sources": [s.model_dump(mode="json") for s in fact.sources],
            }
        )
    return rows


async def _index_counts(inspector: Inspector, tenant_id: str, user_id: str) -> dict[str, int]:
    """The user's index entries, and how many of them have no dense vector a query would
    be compared with (all of them when no embedding model is configured)."""
    index, embedder = inspector.base.index, inspector.base.embedder
    entries = await index.count(tenant_id, user_id)
    without = (
        await index.count_without_vector(tenant_id, user_id, model=embedder.name)
        if embedder is not None
        else entries
    )
    return {"index_entries": entries, "index_entries_without_vector": without}


async def user_view(
    inspector: Inspector, tenant_id: str, user_id: str, page: int = 1
) -> dict[str, Any]:
    """A user's long-term memory, index and conversations; the facts (current first, by
    importance) ``PAGE_SIZE`` a page."""
    ltm = inspector.ltm
    profile = await ltm.profile(tenant_id, user_id)
    facts = await ltm.facts(tenant_id, user_id)
    episodes = sorted(await ltm.episodes(tenant_id, user_id), key=lambda e: e.created_at)
    events = sorted(await ltm.events(tenant_id, user_id), key=lambda e: e.created_at)
    conversations = await inspector.directory.conversations(tenant_id, user_id)
    facts_shown, facts_page = _page(_fact_history(facts), page)
    open_rounds = []
    for conversation in conversations:
        memory = await inspector.store.working_memory(conversation.key)
        if memory is not None and memory.tool_round is not None:
            open_rounds.append(conversation.key.conversation_id)
    return {
        "tenant_id": tenant_id,
        "user_id": user_id,
        "profile": [a.model_dump(mode="json") for _, a in sorted(profile.items())],
        "facts": facts_shown,
        "facts_page": facts_page,
        "episodes": [e.model_dump(mode="json") for e in episodes],
        "events": [e.model_dump(mode="json") for e in events],
        **await _index_counts(inspector, tenant_id, user_id),
        "retention": retention_horizon(
            ltm.retention,
            now=utc_now(),
            profile=list(profile.values()),
            facts=facts,
            episodes=episodes,
            events=events,
        ),
        "raw_trace_retention_days": inspector.settings.memory.raw_trace_retention_days,
        "conversations": [
            {
                "conversation_id": c.key.conversation_id,
                "last_activity": c.last_activity,
                "last_turn": c.last_turn,
                "open_tool_round": c.key.conversation_id in open_rounds,
            }
            for c in conversations
        ],
    }


async def conversation_view(inspector: Inspector, key: ConversationKey) -> dict[str, Any]:
    """The window as the next prompt holds it (tokens per message and per turn), the summary, the raw
    trace and pending memory jobs: ``llm-bot memory show``'s data, plus token counts."""
    data = await show_memory(inspector.settings, key)
    counter = inspector.context.counter
    turns: dict[int, int] = {}
    memory = data["working_memory"] or {"messages": [], "summary": "", "pending_compaction": []}
    for message in memory["messages"]:
        message["tokens"] = counter.count(message["content"])
        turns[message["turn"]] = turns.get(message["turn"], 0) + message["tokens"]
    data["window_tokens_by_turn"] = [{"turn": t, "tokens": n} for t, n in sorted(turns.items())]
    data["summary_tokens"] = counter.count(memory["summary"])
    data["pending_jobs"] = {
        "pending_compaction": memory["pending_compaction"],
        "compacted_through": data["compacted_through"],
        "classified_through": data["classified_through"],
        "unclassified_turns": max(0, data["last_turn"] - data["classified_through"]),
    }
    data.pop("long_term", None)  # the user's page shows it
    return data


async def why_view(
    inspector: Inspector, key: ConversationKey, message: str, at: datetime
) -> dict[str, Any]:
    """The dry run of the prompt ``message`` would get (``why.py``)."""
    return await dry_run(inspector.context, key, message, at)
