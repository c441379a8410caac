""" "Why": a dry run of the prompt a message would get, by the reply path's own code.

``recall``'s steps (``turn_start``, ``already_shown``, ``Retriever.retrieve``) and
``call_model``'s assembly (``prompt_context``) run on a copy of what memory holds: memory
is only loaded (never committed), the model is never called, and the retriever is the
inspector's own (its metrics go to the inspector's registry, not the reply path's). The
search is read again (``Retriever.search``, the function ``retrieve`` calls) for the
scores behind each recalled item: keyword (BM25), dense (cosine), feedback (BM25 of the
words relevance feedback added) and fused rank. An item is recalled only when one of the
first three found it relevant (``ranking.found_by``): its fused rank orders it, it
never brings it in alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from llm_bot.graph.model_call import prompt_context
from llm_bot.graph.recall import already_shown, conversation_texts
from llm_bot.graph.state import GraphContext
from llm_bot.graph.tool_rounds import turn_start
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.memory_block import recalled_group, recalled_line
from llm_bot.memory.memory_message import read_memory
from llm_bot.memory.recall_items import SearchHit, conversation_of
from llm_bot.memory.window import WindowAppend, bounded_messages
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ReplyToMessage
from llm_bot.service.retriever import NOTHING, Retrieval

DRY_RUN_EVENT_ID = "inspector:why"
"""The event id the dry run loads memory as (never recorded: nothing is committed)."""


async def dry_run(
    ctx: GraphContext, key: ConversationKey, text: str, at: datetime
) -> dict[str, Any]:
    """The breakdown of the prompt ``text`` would get in ``key``'s conversation at ``at``."""
    recalled = await ctx.memory.load(key, DRY_RUN_EVENT_ID)
    event = ReplyToMessage(event_id=DRY_RUN_EVENT_ID, key=key, created_at=at, text=text)
    persona = ctx.persona_catalog.choose(None, recalled.memory.session.get("persona"))
    _step, added = turn_start(Route.REPLY, event, recalled, persona, max_rounds=ctx.max_tool_rounds)
    window = bounded_messages([], WindowAppend((*recalled.memory.messages, *added), ctx.bounds))
    retrieval: Retrieval = NOTHING
    hits: list[SearchHit] = []
    if ctx.retriever is not None and persona.retrieval:
        query = ctx.retriever.prepare(text, at)
        ctx.retriever.reach_across(query, conversation_texts(recalled))
        shown = already_shown(recalled, added, ctx.bounds)
        retrieval = await ctx.retriever.retrieve(
            query, key, exclude=shown, topic=recalled.memory.topic, explain=True
        )
        hits = list(retrieval.candidates)
    context = prompt_context(
        persona, recalled, window, retrieval, budget=ctx.budget, counter=ctx.counter
    )
    sections = _sections(ctx, context.messages, context.window_messages)
    in_prompt = _recalled_in_prompt(context.messages)
    return {
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": key.conversation_id,
        "message_chars": len(text),
        "at": at.isoformat(),
        "persona": persona.name,
        "budget": context.budget,
        "tokens": context.tokens,
        "over_budget": context.over_budget,
        "shortened": context.shortened,
        "dropped": dict(context.dropped),
        "retrieval": retrieval.outcome,
        "sections": sections,
        "recalled": _recalled(retrieval, hits, in_prompt),
        "prompt": context.messages,
    }


def _sections(
    ctx: GraphContext, messages: list[dict[str, Any]], window_messages: int
) -> list[dict[str, Any]]:
    """system, memory, window (earlier turns), current turn: each with its tokens."""
    head = messages[: len(messages) - window_messages]
    window = messages[len(messages) - window_messages :]
    parts: list[tuple[str, list[dict[str, Any]]]] = [
        ("system", [m for m in head if m.get("role") == "system"]),
        ("memory", [m for m in head if m.get("role") != "system"]),
        ("window", window[:-1]),
        ("current turn", window[-1:]),
    ]
    return [
        {
            "name": name,
            "messages": len(part),
            "tokens": ctx.counter.count_messages(part) if part else 0,
            "budget": ctx.budget.input_budget,
        }
        for name, part in parts
    ]


def _recalled_in_prompt(messages: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The recalled lines the prompt shows, each with its group (date)."""
    lines: set[tuple[str, str]] = set()
    for message in messages:
        document = read_memory(message)
        groups = document.get("recalled") if document is not None else None
        if isinstance(groups, dict):
            lines.update((str(g), str(line)) for g, shown in groups.items() for line in shown)
    return lines


def _recalled(
    retrieval: Retrieval, hits: list[SearchHit], in_prompt: set[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Every recalled record (and every hit of the search), with its scores, its rank in
    the fusion, where it came from and whether the budget left it in the prompt."""
    by_id = {hit.entry.id: (rank, hit) for rank, hit in enumerate(hits, start=1)}
    items: list[dict[str, Any]] = []
    for record in retrieval.records:
        rank, found = by_id.pop(record.id, (None, None))
        item = _item(record.id, record.text, record.score, rank=rank, hit=found, date=record.date)
        line = (recalled_group(record.date), recalled_line(record.text, record.speaker))
        item["in_prompt"] = line in in_prompt
        item["left_out"] = None if item["in_prompt"] else "prompt budget"
        items.append(item)
    for entry_id, (rank, hit) in by_id.items():
        item = _item(entry_id, hit.entry.text, hit.score, rank=rank, hit=hit, date=hit.entry.date)
        item["in_prompt"] = False
        item["left_out"] = "recall budget"
        items.append(item)
    return items


def _item(
    entry_id: str, text: str, score: float, *, rank: int | None, hit: SearchHit | None, date: str
) -> dict[str, Any]:
    entry = hit.entry if hit is not None else None
    return {
        "id": entry_id,
        "text": text,
        "fused_score": round(score, 4),
        "fused_rank": rank,
        "keyword_score": round(hit.keyword, 4) if hit is not None else None,
        "dense_score": round(hit.dense, 4) if hit is not None else None,
        "feedback_score": round(hit.feedback, 4) if hit is not None else None,
        "date": date,
        "kind": entry.kind if entry is not None else None,
        "conversation_id": conversation_of(entry_id),
        "turn": entry.turn if entry is not None else None,
        "source_id": entry.source_id if entry is not None else None,
    }


def render_why(data: dict[str, Any]) -> str:
    """The breakdown as text (``llm-bot memory why``)."""
    lines = [
        f"prompt for {data['tenant_id']}/{data['user_id']}/{data['conversation_id']} at "
        f"{data['at'][:19]}: {data['tokens']} of {data['budget']} tokens"
        f" (persona {data['persona']}, retrieval {data['retrieval']})",
        "sections:",
    ]
    lines.extend(
        f"  {s['name']:<13} {s['tokens']:>6} tokens  {s['messages']} message(s)"
        for s in data["sections"]
    )
    dropped = {k: v for k, v in data["dropped"].items() if v}
    lines.append(
        "left out for the budget: "
        + (", ".join(f"{k}={v}" for k, v in dropped.items()) or "nothing")
    )
    lines.append(f"recalled items ({len(data['recalled'])}):")
    for item in data["recalled"]:
        where = "in prompt" if item["in_prompt"] else f"left out ({item['left_out']})"
        lines.append(
            f"  #{item['fused_rank'] or '-'} fused {item['fused_score']} keyword "
            f"{item['keyword_score']} dense {item['dense_score']} feedback "
            f"{item['feedback_score']}  {where}  "
            f"[{item['id']}] {item['text']}"
        )
    return "\n".join(lines)
