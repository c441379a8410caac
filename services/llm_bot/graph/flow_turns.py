"""``flow``: a message applied to the conversation's flow (SPEC 5.10): started, or
resumed with the reply. The flow's next question, or its closing words, is the reply; no
model call, unless an ambiguous answer needs the model's reading."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

from llm_bot.graph.reply_stream import stream_for
from llm_bot.graph.state import GraphState
from llm_bot.memory.context import AssembledContext, ContextBudget
from llm_bot.ports import ModelReply, ReplyChannel
from llm_bot.service.commands import ReplyToMessage
from llm_bot.service.flow_runner import FlowRunner, FlowStart
from llm_bot.service.personas import PersonaCatalog
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


async def flow_reply(
    state: GraphState,
    *,
    flows: FlowRunner,
    personas: PersonaCatalog,
    clock: Callable[[], datetime],
    budget: ContextBudget,
    metrics: Metrics,
    replies: ReplyChannel | None,
    stream_interval: float,
) -> dict[str, Any]:
    """The flow's turn, and its words as the reply (with an empty prompt: none was sent)."""
    event, recalled = state["event"], state["recalled"]
    if not isinstance(event, ReplyToMessage):  # supervisor routes only messages here
        raise TypeError(f"a flow takes messages, not {event.event_type}")
    asked = personas.choose(event.persona) if event.persona is not None else None
    start = FlowStart(asked.flow, asked.name) if asked is not None and asked.flow else None
    turn = await flows.turn(
        event.key,
        event_id=event.event_id,
        text=event.text,
        now=clock(),
        start=start,
        erasure=recalled.erasure,
    )
    stream = stream_for(event, replies, stream_interval)
    if stream is not None:
        await stream(turn.text)
    if turn.result is not None and not turn.replayed:
        metrics.flow_results.labels(turn.result.status).inc()
    log.info("flow.replied", flow=turn.flow, ended=turn.result.status if turn.result else None)
    reply = ModelReply(text=turn.text, model=f"flow:{turn.flow}", input_tokens=0, output_tokens=0)
    no_prompt = AssembledContext(
        messages=[],
        tokens=0,
        budget=budget.input_budget,
        over_budget=False,
        long_term_items=0,
        summary_included=False,
        dropped={},
    )
    return {"flow_turn": turn, "reply": reply, "context": no_prompt}
