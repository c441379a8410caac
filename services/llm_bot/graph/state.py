"""Graph state and the runtime context the nodes receive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, TypedDict

from opentelemetry.trace import Tracer

from llm_bot.contract import CandidateV1, MemoryJobV1, ToolTrace, TranscriptMessage
from llm_bot.memory.context import AssembledContext, ContextBudget
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tokens import TokenCounter
from llm_bot.memory.window import WindowBounds, bounded_messages
from llm_bot.memory.working import ConversationKey, Recalled
from llm_bot.ports import ChatModel, MemoryStore, ModelReply
from llm_bot.service.retriever import Retrieval, Retriever
from llm_bot.telemetry.metrics import Metrics


@dataclass(frozen=True)
class ChatEvent:
    """The command the graph runs on: a validated ``message``, ``transcript`` or ``tool.*``
    event."""

    event_id: str
    type: Literal["message", "transcript", "tool.call", "tool.result"]
    key: ConversationKey
    created_at: datetime
    text: str = ""
    lang: str | None = None
    tool: ToolTrace | None = None
    transcript: tuple[TranscriptMessage, ...] = ()


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


Route = Literal["skip", "duplicate", "tool", "transcript", "reply"]


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
