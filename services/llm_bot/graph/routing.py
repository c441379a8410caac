"""Which way an event goes through the graph, decided without a model call (SPEC 5.10).

The entry node (``ingest``, or ``supervisor`` when some persona runs a flow) chooses the
next node itself (``Command(goto=...)``): routing in the node that knows the route costs
LangGraph no separate branch step per event.
"""

from __future__ import annotations

from typing import assert_never

import structlog
from langgraph.graph import END
from langgraph.types import Command

from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import (
    ChatEvent,
    ImportTranscript,
    RecordToolCall,
    RecordToolResult,
    ReplyToMessage,
)
from llm_bot.service.flow_runner import FlowRunner
from llm_bot.service.personas import PersonaCatalog

log = structlog.get_logger(__name__)

INGEST_NEXT = ("recall", END)
"""Where the entry node may go: on to ``recall``, or nowhere (SKIP)."""
ROUTES_WITHOUT_MODEL = (Route.TOOL, Route.TRANSCRIPT)
"""Routes that only record what they bring: ``recall`` sends them to ``remember``."""
RECALL_NEXT = ("call_model", "remember", END)
FLOW_RECALL_NEXT = (*RECALL_NEXT, "flow")


def route_event(event: ChatEvent) -> Command[str]:
    """SKIP a message without prompt text, record tool traces and transcripts, reply to the
    rest."""
    match event:
        case RecordToolCall() | RecordToolResult():
            return Command(update={"route": Route.TOOL}, goto="recall")
        case ImportTranscript():
            return Command(update={"route": Route.TRANSCRIPT}, goto="recall")
        case ReplyToMessage() if not event.text.strip():
            log.info("event.skipped", reason="no_prompt_text")
            return Command(update={"route": Route.SKIP}, goto=END)
        case ReplyToMessage():
            return Command(update={"route": Route.REPLY}, goto="recall")
        case _:
            assert_never(event)


async def route_to_flow_or_chat(
    event: ChatEvent, *, personas: PersonaCatalog, flows: FlowRunner | None
) -> Command[str]:
    """A message goes to the conversation's flow while one is running (or this very event
    ended it), or when it names a flow persona; everything else as ``route_event`` routes
    it."""
    if flows is not None and isinstance(event, ReplyToMessage) and event.text.strip():
        asked = personas.choose(event.persona) if event.persona is not None else None
        if (asked is not None and asked.flow is not None) or await flows.takes(
            event.key, event.event_id
        ):
            return Command(update={"route": Route.FLOW}, goto="recall")
    return route_event(event)
