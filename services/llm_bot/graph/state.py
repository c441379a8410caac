"""Graph state and the runtime context the nodes receive."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, TypedDict

from opentelemetry.trace import Tracer

from llm_bot.contract import CandidateV1, MemoryJobV1
from llm_bot.memory.context import AssembledContext, ContextBudget
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tokens import TokenCounter
from llm_bot.memory.tool_rounds import ToolRound
from llm_bot.memory.window import WindowBounds, bounded_messages
from llm_bot.memory.working import Recalled
from llm_bot.ports import (
    ChatModel,
    ConversationSchedule,
    MemoryStore,
    ModelReply,
    ReplyChannel,
    ToolSpec,
)
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent
from llm_bot.service.flow_runner import FlowRunner, FlowTurn
from llm_bot.service.personas import Persona, PersonaCatalog, single_persona
from llm_bot.service.retriever import Retrieval, Retriever
from llm_bot.service.tool_catalog import ToolCatalog
from llm_bot.telemetry.metrics import Metrics


@dataclass(frozen=True)
class GraphContext:
    """Collaborators and settings of a graph run (LangGraph runtime context)."""

    memory: MemoryStore
    model: ChatModel
    model_name: str
    bounds: WindowBounds
    system_prompt: str
    clock: Callable[[], datetime]
    tracer: Tracer
    metrics: Metrics
    budget: ContextBudget
    counter: TokenCounter
    retriever: Retriever | None = None
    """None when retrieval is off (``LLM_BOT_EMBEDDINGS=off``)."""
    tools: ToolCatalog = field(default_factory=ToolCatalog)
    """Which tools a message offers the model (``service/tool_catalog.py``)."""
    max_tool_rounds: int = 5
    """Rounds of tool calls per turn; the model call after the last one offers no tools."""
    tool_rounds: ConversationSchedule | None = None
    """Where open rounds are scheduled for the worker's timeout sweep (None: nowhere)."""
    tool_result_timeout_seconds: float = 120.0
    replies: ReplyChannel | None = None
    """Where streamed replies go (events with a ``reply_to``); None: nothing streams."""
    stream_interval_seconds: float = 0.04
    """After a streamed reply's first piece, pieces are gathered this long per send."""
    personas: PersonaCatalog | None = None
    """``LLM_BOT_PERSONAS_PATH``'s personas; None: one persona from ``system_prompt`` and
    ``tools``."""

    flows: FlowRunner | None = None
    """Runs the personas' flows; None when no persona has one (the graph has no
    ``supervisor`` then: every event goes to the memory chat)."""

    @functools.cached_property
    def persona_catalog(self) -> PersonaCatalog:
        """The personas, built once per context (not per event) when none were given."""
        return self.personas or single_persona(self.system_prompt, self.tools)


class GraphState(TypedDict, total=False):
    """State of one event's run; nodes return only the keys they change."""

    event: ChatEvent
    lease_token: str | None
    route: Route
    recalled: Recalled
    turn: int
    turn_messages: list[ChatMessage]
    messages: Annotated[list[ChatMessage], bounded_messages]
    retrieval: Retrieval
    context: AssembledContext
    reply: ModelReply
    candidate: CandidateV1
    job: MemoryJobV1
    tools: tuple[ToolSpec, ...]
    """Offered to this model call (none: the model must answer in text)."""
    rounds_done: int
    """Rounds of tool calls this turn has completed (0 before any)."""
    tool_round: ToolRound | None
    """The open round after this event (written to working memory by ``remember``)."""
    persona: Persona
    """How this event is answered (chosen in ``recall``)."""
    flow_turn: FlowTurn
    """What the message did to the conversation's flow (route ``flow``)."""


__all__ = [
    "ChatEvent",  # re-exported: its home is service/commands.py
    "GraphContext",
    "GraphState",
    "Route",  # re-exported: its home is service/chat_runs.py
]
