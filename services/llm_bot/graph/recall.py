"""``recall``: load working memory, number the turn, put the event's messages into the
window and retrieve what is relevant to a message (its embedding overlaps the memory
load). Then a duplicate ends here, a tool trace or transcript goes to ``remember``, a
message to the model (or to its flow)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from langgraph.graph import END
from langgraph.types import Command

from llm_bot.graph.duplicates import DuplicateReplay
from llm_bot.graph.routing import ROUTES_WITHOUT_MODEL
from llm_bot.graph.state import GraphState
from llm_bot.graph.tool_rounds import turn_start
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.topic_state import TopicState
from llm_bot.memory.window import WindowAppend, WindowBounds, reduce_window
from llm_bot.memory.working import Recalled
from llm_bot.ports import MemoryStore
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent, RecordToolResult, ReplyToMessage
from llm_bot.service.personas import PersonaCatalog
from llm_bot.service.retriever import Retrieval, Retriever
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


async def recall_turn(
    state: GraphState,
    *,
    memory: MemoryStore,
    personas: PersonaCatalog,
    retriever: Retriever | None,
    bounds: WindowBounds,
    max_tool_rounds: int,
    metrics: Metrics,
    replay: DuplicateReplay,
) -> Command[str]:
    """The event's turn, window and recalled memory, and the node that goes on with it."""
    event = state["event"]
    message = event if isinstance(event, ReplyToMessage) else None
    replying = state["route"] == Route.REPLY and message is not None
    asked = personas.choose(event.persona) if event.persona is not None else None
    searching = retriever is not None and replying and (asked is None or asked.retrieval)
    query = (
        retriever.prepare(message.text, event.created_at)
        if retriever and message and searching
        else None
    )
    try:
        recalled = await memory.load(event.key, event.event_id)
    except BaseException:
        if query is not None:
            query.cancel()
        raise
    ended = await _ended_early(event, recalled, replay)
    if ended is not None:
        if query is not None:
            query.cancel()
        return ended
    persona = asked or personas.choose(None, recalled.memory.session.get("persona"))
    if query is not None and not persona.retrieval:
        query.cancel()
    searching = searching and persona.retrieval
    loaded = recalled.memory.messages
    step, added = turn_start(state["route"], event, recalled, persona, max_rounds=max_tool_rounds)
    if step.route == Route.TOOL_DUPLICATE:
        called = event.tool.tool_call_id if isinstance(event, RecordToolResult) else ""
        log.info("tool.duplicate_result", tool_call_id=called)
        return Command(update={"route": Route.TOOL_DUPLICATE, "recalled": recalled}, goto=END)
    update: dict[str, Any] = {
        "route": step.route,
        "recalled": recalled,
        "turn": added[-1].turn,
        "turn_messages": added,
        "messages": WindowAppend((*loaded, *added), bounds),
        "tools": step.tools,
        "rounds_done": step.rounds_done,
        "tool_round": step.tool_round,
        "persona": persona,
    }
    if step.route == Route.CONTINUE and recalled.memory.topic is not None and retriever:
        # The turn goes on: what was recalled for its message stays (and the prefix too).
        update["retrieval"] = await _kept(retriever, recalled.memory.topic, event, metrics)
    if replying and not searching:
        metrics.retrieval_searches.labels("off").inc()
    elif retriever is not None and searching:
        retriever.reach_across(query, conversation_texts(recalled))
        update["retrieval"] = await retriever.retrieve(
            query,
            event.key,
            exclude=already_shown(recalled, added, bounds),
            topic=recalled.memory.topic,
        )
    if step.route == Route.CONTINUE:
        metrics.tool_rounds.labels("completed").inc()
    if step.closing:
        metrics.tool_rounds.labels("closed").inc()
    if step.route in ROUTES_WITHOUT_MODEL:
        return Command(update=update, goto="remember")
    return Command(update=update, goto="flow" if step.route == Route.FLOW else "call_model")


async def _kept(
    retriever: Retriever, topic: TopicState, event: ChatEvent, metrics: Metrics
) -> Retrieval:
    """The topic's selection read back for a turn that goes on; a read that fails or times
    out is counted as a search's would be (the turn goes on without recall)."""
    reuse = await retriever.reuse(topic, event.key)
    if reuse.outcome != "topic_reuse":
        metrics.retrieval_searches.labels(reuse.outcome).inc()
    return reuse


def conversation_texts(recalled: Recalled) -> list[str]:
    """What the conversation said so far, as far as the prompt shows it: its window and
    summary (the script it is written in, for ``Retriever.reach_across``)."""
    return [*(m.content for m in recalled.memory.messages), recalled.memory.summary]


def already_shown(
    recalled: Recalled, added: Sequence[ChatMessage], bounds: WindowBounds
) -> set[str]:
    """Ids of what the window (with ``added``) and the long-term bundle already show: not
    recalled again."""
    window = reduce_window(recalled.memory.messages, added, bounds).messages
    return {m.id for m in window} | recalled.bundle.item_ids()


async def _ended_early(
    event: ChatEvent, recalled: Recalled, replay: DuplicateReplay
) -> Command[str] | None:
    """A duplicate is replayed; an event made before a ``memory.forget`` that erased its
    conversation (it waited in the fair queue, or was in flight) is skipped: nothing the
    user said before the erasure is recorded after it. None: the turn goes on."""
    if recalled.processed is not None:
        return await replay(event, recalled, recalled.processed)
    if event.created_at.timestamp() <= recalled.erased_before:
        log.info("event.skipped", reason="erased_after_it_was_made")
        return Command(update={"route": Route.SKIP, "recalled": recalled}, goto=END)
    return None
