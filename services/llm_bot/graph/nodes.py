"""The graph's nodes, one per step, each returning only the state keys it changes.

``ingest`` and ``recall`` choose the next node themselves (``Command(goto=...)``): routing
in the node that knows the route costs LangGraph no separate branch step per event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Command

from llm_bot.contract import (
    CandidateMemory,
    CandidateToolCall,
    CandidateUsage,
    CandidateV1,
    FlowResultV1,
    MemoryJobV1,
)
from llm_bot.contract.messages import candidate_id, derived_id
from llm_bot.graph.reply_stream import ReplyStream
from llm_bot.graph.state import ChatEvent, GraphContext, GraphState, Route
from llm_bot.memory.context import AssembledContext, assemble_context
from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.tool_rounds import ToolRound, closing_messages
from llm_bot.memory.transcript import transcript_turns
from llm_bot.memory.window import WindowAppend, reduce_window
from llm_bot.memory.working import (
    ConversationKey,
    MemoryCommit,
    ProcessedEvent,
    Recalled,
    WorkingMemory,
)
from llm_bot.ports import ModelReply, ToolSpec
from llm_bot.service.flow_runner import FlowStart, FlowTurn
from llm_bot.service.personas import Persona
from llm_bot.service.retriever import Retrieval

log = structlog.get_logger(__name__)

Update = dict[str, Any]


INGEST_NEXT = ("recall", END)
ROUTES_WITHOUT_MODEL = ("tool", "transcript")
RECALL_NEXT = ("call_model", "remember", END)
FLOW_RECALL_NEXT = (*RECALL_NEXT, "flow")


def _last_selection(recalled: Recalled) -> frozenset[str]:
    """Ids of what the previous turn recalled (the conversation's topic selection)."""
    topic = recalled.memory.topic
    return frozenset(record.id for record in topic.selection) if topic else frozenset()


def prompt_cache_key(tenant_id: str, user_id: str) -> str:
    """The provider's ``prompt_cache_key`` for one user: their prompts share the system
    prompt and memory block, so routing them together lets the cache hit. A digest, so
    the provider never learns tenant or user ids."""
    digest = hashlib.sha256(f"{tenant_id}|{user_id}".encode()).hexdigest()[:32]
    return f"llmbot-{digest}"


async def supervisor(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Route each event to the persona's graph, without a model call (SPEC 5.10): a
    message to the conversation's flow while one is running (or this very event ended
    it), or when it names a flow persona; everything else to the memory chat, routed as
    ``ingest`` routes it (this node takes ``ingest``'s place in a graph with flows, so
    routing costs no extra step)."""
    ctx = runtime.context
    event = state["event"]
    if ctx.flows is not None and event.type == "message" and event.text.strip():
        asked = ctx.persona_catalog.choose(event.persona) if event.persona is not None else None
        if (asked is not None and asked.flow is not None) or await ctx.flows.takes(
            event.key, event.event_id
        ):
            return Command(update={"route": "flow"}, goto="recall")
    return _ingest_route(state["event"])


async def ingest(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Decide the route: SKIP a message without prompt text, record tool traces, reply."""
    return _ingest_route(state["event"])


def _ingest_route(event: ChatEvent) -> Command[str]:
    if event.type in ("tool.call", "tool.result"):
        return Command(update={"route": "tool"}, goto="recall")
    if event.type == "transcript":
        return Command(update={"route": "transcript"}, goto="recall")
    if not event.text.strip():
        log.info("event.skipped", reason="no_prompt_text")
        return Command(update={"route": "skip"}, goto=END)
    return Command(update={"route": "reply"}, goto="recall")


def _turn_message(event: ChatEvent, turn: int, seq: int, created_at: str) -> ChatMessage:
    """The message this event contributes to its turn."""
    if event.type == "tool.call" and event.tool is not None:
        call = ToolCall(
            id=event.tool.tool_call_id,
            name=event.tool.name or "tool",
            arguments=event.tool.arguments,
        )
        return ChatMessage(
            id=f"{event.event_id}:call",
            role="assistant",
            content="",
            created_at=created_at,
            turn=turn,
            seq=seq,
            event_id=event.event_id,
            tool_calls=(call,),
        )
    if event.type == "tool.result" and event.tool is not None:
        return ChatMessage(
            id=f"{event.event_id}:result",
            role="tool",
            content=event.tool.content,
            created_at=created_at,
            turn=turn,
            seq=seq,
            event_id=event.event_id,
            tool_call_id=event.tool.tool_call_id,
        )
    return ChatMessage(
        id=f"{event.event_id}:user",
        role="user",
        content=event.text,
        created_at=created_at,
        turn=turn,
        seq=seq,
        event_id=event.event_id,
    )


async def recall(state: GraphState, runtime: Runtime[GraphContext]) -> Command[str]:
    """Load working memory; number the turn; put the event's message into the window;
    retrieve what is relevant to a message (its embedding overlaps the memory load).
    Then: a duplicate ends here, a tool trace goes to ``remember``, a message to the model."""
    ctx = runtime.context
    event = state["event"]
    replying = state["route"] == "reply"
    personas = ctx.persona_catalog
    asked = personas.choose(event.persona) if event.persona is not None else None
    searching = ctx.retriever is not None and replying and (asked is None or asked.retrieval)
    query = (
        ctx.retriever.prepare(event.text, event.created_at) if ctx.retriever and searching else None
    )
    try:
        recalled = await ctx.memory.load(event.key, event.event_id)
    except BaseException:
        if query is not None:
            query.cancel()
        raise
    if recalled.processed is not None:
        if query is not None:
            query.cancel()
        return await _duplicate(ctx, event, recalled, recalled.processed)
    persona = asked or personas.choose(None, recalled.memory.session.get("persona"))
    if query is not None and not persona.retrieval:
        query.cancel()
    searching = searching and persona.retrieval
    loaded = recalled.memory.messages
    step, added = turn_start(ctx, state["route"], event, recalled, persona)
    if step.route == "tool_duplicate":
        log.info(
            "tool.duplicate_result", tool_call_id=event.tool.tool_call_id if event.tool else ""
        )
        return Command(update={"route": "tool_duplicate", "recalled": recalled}, goto=END)
    update: Update = {
        "route": step.route,
        "recalled": recalled,
        "turn": added[-1].turn,
        "turn_messages": added,
        "messages": WindowAppend((*loaded, *added), ctx.bounds),
        "tools": step.tools,
        "rounds_done": step.rounds_done,
        "tool_round": step.tool_round,
        "persona": persona,
    }
    if step.route == "continue" and recalled.memory.topic is not None:
        # The turn goes on: what was recalled for its message stays (and the prefix too).
        topic = recalled.memory.topic
        update["retrieval"] = Retrieval("topic_reuse", topic.selection, topic, 0.0)
    if replying and not searching:
        ctx.metrics.retrieval_searches.labels("off").inc()
    elif ctx.retriever is not None and searching:
        update["retrieval"] = await ctx.retriever.retrieve(
            query,
            event.key,
            exclude=already_shown(ctx, recalled, added),
            topic=recalled.memory.topic,
        )
    if step.route == "continue":
        ctx.metrics.tool_rounds.labels("completed").inc()
    if step.closing:
        ctx.metrics.tool_rounds.labels("closed").inc()
    if step.route in ROUTES_WITHOUT_MODEL:
        return Command(update=update, goto="remember")
    return Command(update=update, goto="flow" if step.route == "flow" else "call_model")


def turn_start(
    ctx: GraphContext, route: Route, event: ChatEvent, recalled: Recalled, persona: Persona
) -> tuple[ToolStep, list[ChatMessage]]:
    """The event's step in the tool round and the messages it adds to the window (the
    closing "no result" messages first). ``recall`` and the inspector's dry run use it."""
    step = _tool_step(
        route, event, recalled, ctx.max_tool_rounds, persona.tools.for_message(event.tools)
    )
    if step.route == "tool_duplicate":
        return step, []
    return step, [*step.closing, *_numbered(event, recalled)]


def already_shown(ctx: GraphContext, recalled: Recalled, added: Sequence[ChatMessage]) -> set[str]:
    """Ids of what the window (with ``added``) and the long-term bundle already show: not
    recalled again."""
    window = reduce_window(recalled.memory.messages, added, ctx.bounds).messages
    return {m.id for m in window} | recalled.bundle.item_ids()


async def _duplicate(
    ctx: GraphContext, event: ChatEvent, recalled: Recalled, processed: ProcessedEvent
) -> Command[str]:
    """An event processed before ends here: what it produced is republished, and the steps
    after its commit that a crash may have cut short are done again."""
    log.info("event.duplicate", turn=processed.turn)
    update: Update = {"route": "duplicate", "recalled": recalled}
    tokens = None
    if processed.candidate_json:
        candidate = CandidateV1.model_validate_json(processed.candidate_json)
        update["candidate"] = candidate
        tokens = candidate.usage.input_tokens
    update["job"] = turn_job(event, processed.turn, tokens, ctx.clock())
    await _schedule(ctx, event.key, None, recalled.memory.tool_round)
    if processed.flow_result_json and ctx.flows is not None:
        result = FlowResultV1.model_validate_json(processed.flow_result_json)
        # Its checkpoint goes only after the result was published: still there, the
        # result may not have gone out (a crash in between), so it goes (again).
        if await ctx.flows.holds(event.key, result.id):
            update["flow_turn"] = FlowTurn(result.flow, "", result)
    return Command(update=update, goto=END)


@dataclass(frozen=True)
class ToolStep:
    """What an event does to the conversation's tool round (SPEC 5.9)."""

    route: Route
    tool_round: ToolRound | None
    tools: tuple[ToolSpec, ...] = ()
    rounds_done: int = 0
    closing: tuple[ChatMessage, ...] = ()
    """"No result" tool messages closing the open calls before a new user message."""


def _tool_step(
    route: Route,
    event: ChatEvent,
    recalled: Recalled,
    max_rounds: int,
    offered: tuple[ToolSpec, ...],
) -> ToolStep:
    """A user message closes the open round (its calls get "no result"); a tool result for
    an open call answers it and, when it was the last, continues the turn (the model is
    called again, with the turn's tools until ``max_rounds`` rounds were done); a result for
    a call already answered changes nothing; one for an unknown call is only recorded."""
    current = recalled.memory.tool_round
    if route in ("reply", "flow"):
        if current is None or current.complete():
            return ToolStep(route, None, tools=offered)
        closing = closing_messages(
            current,
            event_id=event.event_id,
            next_seq=_next_seq(recalled),
            created_at=event.created_at.isoformat(),
            reason="user_moved_on",
        )
        return ToolStep(route, None, tools=offered, closing=tuple(closing))
    if event.type != "tool.result" or event.tool is None:
        return ToolStep(route, current)
    call_id = event.tool.tool_call_id
    if any(m.role == "tool" and m.tool_call_id == call_id for m in recalled.memory.messages):
        return ToolStep("tool_duplicate", current)  # answered already, in this round or before
    if current is None:
        return ToolStep(route, current)
    return _answered(route, current, call_id, max_rounds)


def _answered(route: Route, current: ToolRound, call_id: str, max_rounds: int) -> ToolStep:
    """The step of a tool result for ``call_id`` while ``current`` is open."""
    if call_id in current.answered:
        return ToolStep("tool_duplicate", current)
    if call_id not in current.calls:
        return ToolStep(route, current)
    answered = current.answer(call_id)
    if not answered.complete():
        return ToolStep(route, answered)
    tools = answered.tools if answered.round < max_rounds else ()
    return ToolStep("continue", None, tools=tools, rounds_done=answered.round)


def _next_seq(recalled: Recalled) -> int:
    """The next sequence number in the conversation's last turn."""
    loaded = recalled.memory.messages
    return 1 + max((m.seq for m in loaded if m.turn == recalled.last_turn), default=-1)


def _numbered(event: ChatEvent, recalled: Recalled) -> list[ChatMessage]:
    """The event's messages numbered into the conversation: a message opens the next turn,
    a tool trace joins the current one, a transcript is numbered message by message."""
    next_seq = _next_seq(recalled)
    if event.type == "transcript":
        return transcript_turns(
            event.event_id,
            event.transcript,
            last_turn=recalled.last_turn,
            next_seq=next_seq,
            created_at=event.created_at,
        )
    if event.type == "message":
        turn, seq = recalled.last_turn + 1, 0
    else:
        turn, seq = max(recalled.last_turn, 1), next_seq
    return [_turn_message(event, turn, seq, event.created_at.isoformat())]


async def call_model(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Assemble the context from memory and the bounded window, and call the model."""
    ctx = runtime.context
    recalled = state["recalled"]
    retrieval = state.get("retrieval")
    persona = state["persona"]
    context = prompt_context(ctx, persona, recalled, state["messages"], retrieval)
    if context.over_budget:
        log.error("context.over_budget", tokens=context.tokens, budget=context.budget)
    elif context.dropped["window_turns"] or context.shortened:
        log.info(
            "context.trimmed",
            window_turns_dropped=context.dropped["window_turns"],
            shortened=context.shortened,
        )
    if retrieval is not None:
        ctx.metrics.recalled_items.observe(context.recalled_items)
    prompt = context.messages
    ctx.metrics.window_messages.observe(len(state["messages"]))
    key = state["event"].key
    stream = _reply_stream(state["event"], ctx)
    reply = await ctx.model.complete(
        prompt,
        conversation_id=key.conversation_id,
        cache_key=prompt_cache_key(key.tenant_id, key.user_id),
        tools=state.get("tools", ()),
        on_delta=stream,
        model=persona.model,
    )
    if stream is not None:
        await stream.flush()
    log.info(
        "model.replied",
        model=reply.model,
        input_tokens=reply.input_tokens,
        cached_input_tokens=reply.cached_input_tokens,
        output_tokens=reply.output_tokens,
        tool_calls=len(reply.tool_calls),
        window_messages=len(state["messages"]),
    )
    return {"context": context, "reply": reply}


def prompt_context(
    ctx: GraphContext,
    persona: Persona,
    recalled: Recalled,
    window: Sequence[ChatMessage],
    retrieval: Retrieval | None,
) -> AssembledContext:
    """The prompt ``call_model`` sends (and the inspector's dry run shows)."""
    return assemble_context(
        system_prompt=persona.system_prompt,
        bundle=recalled.bundle,
        summary=recalled.memory.summary,
        window=window,
        budget=ctx.budget,
        counter=ctx.counter,
        recalled=retrieval.records if retrieval is not None else (),
        carried=_last_selection(recalled),
    )


def _reply_stream(event: ChatEvent, ctx: GraphContext) -> ReplyStream | None:
    """Where the reply's pieces stream (the event's ``reply_to``), or None (no streaming)."""
    if ctx.replies is None or event.reply_to is None:
        return None
    return ReplyStream(
        ctx.replies,
        event.reply_to,
        key=event.key,
        event_id=event.event_id,
        interval=ctx.stream_interval_seconds,
    )


async def flow(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Apply the message to the conversation's flow (start it, or resume it with the
    reply); the flow's next question, or its closing words, is the reply. No model call,
    unless an ambiguous answer needs the model's reading."""
    ctx = runtime.context
    event, recalled = state["event"], state["recalled"]
    assert ctx.flows is not None  # noqa: S101  # the route exists only with flows
    asked = ctx.persona_catalog.choose(event.persona) if event.persona is not None else None
    start = FlowStart(asked.flow, asked.name) if asked is not None and asked.flow else None
    turn = await ctx.flows.turn(
        event.key,
        event_id=event.event_id,
        text=event.text,
        now=ctx.clock(),
        start=start,
        erasure=recalled.erasure,
    )
    stream = _reply_stream(event, ctx)
    if stream is not None:
        await stream(turn.text)
    if turn.result is not None and not turn.replayed:
        ctx.metrics.flow_results.labels(turn.result.status).inc()
    log.info("flow.replied", flow=turn.flow, ended=turn.result.status if turn.result else None)
    reply = ModelReply(text=turn.text, model=f"flow:{turn.flow}", input_tokens=0, output_tokens=0)
    no_prompt = AssembledContext(
        messages=[],
        tokens=0,
        budget=ctx.budget.input_budget,
        over_budget=False,
        long_term_items=0,
        summary_included=False,
        dropped={},
    )
    return {"flow_turn": turn, "reply": reply, "context": no_prompt}


async def build_candidate(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """CandidateV1 from the assistant reply, and the reply appended to the window."""
    ctx = runtime.context
    event, reply, turn = state["event"], state["reply"], state["turn"]
    now = ctx.clock()
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
            window_messages=state["context"].window_messages,
            summary=state["context"].summary_included,
            long_term_items=state["context"].long_term_items,
            context_tokens=state["context"].tokens,
            recalled_items=state["context"].recalled_items,
            shortened=state["context"].shortened,
        ),
    )
    if calls:
        ctx.metrics.tool_rounds.labels("opened").inc()
    return {
        "candidate": candidate,
        "turn_messages": [*state["turn_messages"], assistant],
        "messages": WindowAppend((assistant,), ctx.bounds),
        "tool_round": opened,
    }


async def remember(state: GraphState, runtime: Runtime[GraphContext]) -> Update:
    """Commit the bounded window, the raw trace and the processed record atomically."""
    ctx = runtime.context
    event, recalled = state["event"], state["recalled"]
    window = tuple(state["messages"])
    # The same pure reduction the state reducer applied, for what it evicted and why.
    reduction = reduce_window(recalled.memory.messages, state["turn_messages"], ctx.bounds)
    evicted_turns = set(reduction.evicted_turns)
    if reduction.trimmed_by_chars:
        ctx.metrics.trims.labels("chars").inc(reduction.trimmed_by_chars)
    if reduction.trimmed_by_count:
        ctx.metrics.trims.labels("count").inc(reduction.trimmed_by_count)
    session = dict(recalled.memory.session)
    if event.lang:
        session["language"] = event.lang
    persona = state.get("persona")
    if persona is not None and event.type == "message" and state["route"] != "flow":
        session["persona"] = persona.name  # tool results and later messages continue it
    retrieval = state.get("retrieval")
    memory = WorkingMemory(
        messages=window,
        summary=recalled.memory.summary,
        session=session,
        pending_compaction=tuple(sorted(set(recalled.memory.pending_compaction) | evicted_turns)),
        updated_at=ctx.clock().isoformat(),
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
    version = await ctx.memory.commit(
        MemoryCommit(
            key=event.key,
            expected_version=recalled.version,
            turn=state["turn"],
            memory=memory,
            trace=tuple(state["turn_messages"]),
            processed=processed,
            lease_token=state.get("lease_token"),
            erasure=recalled.erasure,
        )
    )
    await _schedule(ctx, event.key, recalled.memory.tool_round, memory.tool_round)
    log.info(
        "memory.committed",
        turn=state["turn"],
        version=version,
        window_messages=len(window),
        evicted_turns=sorted(evicted_turns),
    )
    reply = state.get("reply")
    job = turn_job(event, state["turn"], reply.input_tokens if reply else None, ctx.clock())
    return {"job": job}


async def _schedule(
    ctx: GraphContext, key: ConversationKey, before: ToolRound | None, after: ToolRound | None
) -> None:
    """Keep the worker's timeout schedule in step with the conversation's open round."""
    if ctx.tool_rounds is None:
        return
    if after is not None and not after.complete():
        if before is None or before.opened_at != after.opened_at:
            opened = datetime.fromisoformat(after.opened_at).timestamp()
            await ctx.tool_rounds.schedule(key, opened + ctx.tool_result_timeout_seconds)
    elif before is not None:
        await ctx.tool_rounds.unschedule(key)


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
