"""``remember``: the turn committed to working memory, the raw trace and the processed
record in one atomic write, and the memory worker's job for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

from llm_bot.contract import MemoryJobV1
from llm_bot.contract.messages import derived_id
from llm_bot.graph.state import GraphState
from llm_bot.graph.tool_rounds import RoundDeadlines
from llm_bot.memory.window import WindowBounds, reduce_window
from llm_bot.memory.working import MemoryCommit, ProcessedEvent, WorkingMemory
from llm_bot.ports import MemoryStore
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent, ReplyToMessage
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


async def commit_turn(
    state: GraphState,
    *,
    memory: MemoryStore,
    bounds: WindowBounds,
    clock: Callable[[], datetime],
    deadlines: RoundDeadlines,
    metrics: Metrics,
) -> dict[str, Any]:
    """Commit the bounded window, the raw trace and the processed record atomically; the
    turn's memory job is the update."""
    event, recalled = state["event"], state["recalled"]
    window = tuple(state["messages"])
    # The same pure reduction the state reducer applied, for what it evicted and why.
    reduction = reduce_window(recalled.memory.messages, state["turn_messages"], bounds)
    evicted_turns = set(reduction.evicted_turns)
    if reduction.trimmed_by_chars:
        metrics.trims.labels("chars").inc(reduction.trimmed_by_chars)
    if reduction.trimmed_by_count:
        metrics.trims.labels("count").inc(reduction.trimmed_by_count)
    session = dict(recalled.memory.session)
    if event.lang:
        session["language"] = event.lang
    persona = state.get("persona")
    if persona is not None and isinstance(event, ReplyToMessage) and state["route"] != Route.FLOW:
        session["persona"] = persona.name  # tool results and later messages continue it
    retrieval = state.get("retrieval")
    working = WorkingMemory(
        messages=window,
        summary=recalled.memory.summary,
        session=session,
        pending_compaction=tuple(sorted(set(recalled.memory.pending_compaction) | evicted_turns)),
        updated_at=clock().isoformat(),
        topic=retrieval.topic if retrieval is not None else recalled.memory.topic,
        tool_round=state.get("tool_round", recalled.memory.tool_round),
    )
    candidate = state.get("candidate")
    flow_turn = state.get("flow_turn")
    ended = flow_turn.result if flow_turn is not None else None
    processed = ProcessedEvent(
        event_id=event.event_id,
        turn=state["turn"],
        candidate_json=candidate.model_dump_json(by_alias=True) if candidate else None,
        flow_result_json=ended.model_dump_json(by_alias=True) if ended else None,
    )
    version = await memory.commit(
        MemoryCommit(
            key=event.key,
            expected_version=recalled.version,
            turn=state["turn"],
            memory=working,
            trace=tuple(state["turn_messages"]),
            processed=processed,
            lease_token=state.get("lease_token"),
            erasure=recalled.erasure,
        )
    )
    await deadlines.keep(event.key, recalled.memory.tool_round, working.tool_round)
    log.info(
        "memory.committed",
        turn=state["turn"],
        version=version,
        window_messages=len(window),
        evicted_turns=sorted(evicted_turns),
    )
    reply = state.get("reply")
    job = turn_job(event, state["turn"], reply.input_tokens if reply else None, clock())
    return {"job": job}


def turn_job(event: ChatEvent, turn: int, prompt_tokens: int | None, now: datetime) -> MemoryJobV1:
    """The memory worker's job for a committed turn (the same id on every redelivery)."""
    return MemoryJobV1(
        id=derived_id("job", event.event_id),
        kind="turn",
        tenant_id=event.key.tenant_id,
        user_id=event.key.user_id,
        conversation_id=event.key.conversation_id,
        turn=turn,
        event_id=event.event_id,
        prompt_tokens=prompt_tokens,
        created_at=now,
    )
