"""``build_candidate``: the CandidateV1 published for the reply (text, or the model's tool
calls opening a round), and the assistant's message appended to the window."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from llm_bot.contract import CandidateMemory, CandidateToolCall, CandidateUsage, CandidateV1
from llm_bot.contract.messages import candidate_id
from llm_bot.graph.state import GraphState
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tool_rounds import ToolRound
from llm_bot.memory.window import WindowAppend, WindowBounds
from llm_bot.service.retriever import Retrieval
from llm_bot.telemetry.metrics import Metrics


def build_candidate(
    state: GraphState, *, now: datetime, bounds: WindowBounds, metrics: Metrics
) -> dict[str, Any]:
    """CandidateV1 from the assistant reply, and the reply appended to the window."""
    event, reply, turn = state["event"], state["reply"], state["turn"]
    # Calls count only when tools were offered (the last round offers none: text ends it).
    calls = reply.tool_calls if state.get("tools") else ()
    assistant = ChatMessage(
        id=f"{event.event_id}:assistant",
        role="assistant",
        content=reply.text,
        created_at=now.isoformat(),
        turn=turn,
        seq=1 + max(m.seq for m in state["turn_messages"] if m.turn == turn),
        event_id=event.event_id,
        tool_calls=calls,
        recall=skipped_recall(state.get("retrieval")),
    )
    opened = (
        ToolRound(
            round=state.get("rounds_done", 0) + 1,
            turn=turn,
            calls=tuple(call.id for call in calls),
            names=tuple(call.name for call in calls),
            tools=state.get("tools", ()),
            opened_at=now.isoformat(),
        )
        if calls
        else None
    )
    context = state["context"]
    candidate = CandidateV1(
        id=candidate_id(event.key.tenant_id, event.key.user_id, event.event_id),
        event_id=event.event_id,
        tenant_id=event.key.tenant_id,
        user_id=event.key.user_id,
        conversation_id=event.key.conversation_id,
        turn=turn,
        kind="tool_call" if calls else "text",
        text=reply.text,
        tool_calls=[
            CandidateToolCall(id=call.id, name=call.name, arguments=call.arguments)
            for call in calls
        ]
        or None,
        created_at=now,
        model=reply.model,
        usage=CandidateUsage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cached_input_tokens=reply.cached_input_tokens,
        ),
        memory=CandidateMemory(
            window_messages=context.window_messages,
            summary=context.summary_included,
            long_term_items=context.long_term_items,
            context_tokens=context.tokens,
            recalled_items=context.recalled_items,
            shortened=context.shortened,
        ),
    )
    if calls:
        metrics.tool_rounds.labels("opened").inc()
    return {
        "candidate": candidate,
        "turn_messages": [*state["turn_messages"], assistant],
        "messages": WindowAppend((assistant,), bounds),
        "tool_round": opened,
    }


def skipped_recall(retrieval: Retrieval | None) -> str | None:
    """What the turn's record says of a recall that went on without its search: the
    outcome, and what a timed-out search waited for; None when recall did its work (or
    was not asked to)."""
    if retrieval is None or retrieval.outcome not in {"timeout", "failed"}:
        return None
    if retrieval.timed_out is None:
        return retrieval.outcome
    return f"{retrieval.outcome}: {retrieval.timed_out}"
