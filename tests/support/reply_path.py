"""The reply path on fakes, for unit tests of the graph's steps and the handler: a
scripted model, a recording reply channel, the in-memory stores, and the graph's runtime
context and chat runner wired from them as ``bootstrap`` wires the real ones."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from llm_bot.context_budget import ContextBudget
from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1, ToolTrace, TranscriptMessage
from llm_bot.flows.definitions import Flow
from llm_bot.graph.builder import build_graph
from llm_bot.graph.runner import GraphChatRunner
from llm_bot.graph.state import GraphContext
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.messages import PromptMessage, ToolCall
from llm_bot.memory.tokens import default_token_counter
from llm_bot.memory.window import WindowBounds
from llm_bot.ports import DeltaSink, ModelReply, ToolSpec
from llm_bot.service.commands import (
    ImportTranscript,
    RecordToolCall,
    RecordToolResult,
    ReplyToMessage,
)
from llm_bot.service.flow_runner import FlowRunner
from llm_bot.service.personas import Persona, PersonaCatalog
from llm_bot.telemetry.metrics import Metrics
from tests.support.in_memory import InMemoryErasures
from tests.support.in_memory_flows import InMemoryFlowCheckpoints, InMemorySchedule
from tests.support.in_memory_store import FencedLease, InMemoryMemoryStore

KEY = ConversationKey("t1", "u1", "c1")
START = datetime(2025, 7, 30, 10, 0, tzinfo=UTC)
_ids = itertools.count(1)

CHECKIN = Flow.model_validate(
    {
        "intro": "Time for your check-in.",
        "questions": [{"id": "mood", "type": "scale", "text": "How are you, 1 to 10?"}],
        "completed_text": "Thanks, that's all.",
    }
)
"""A one-question flow: a message starts it, the next answer ends it."""
FLOW_PERSONAS = PersonaCatalog(
    default=Persona("default", "You help."),
    named={"checkin": Persona("checkin", "", flow="checkin")},
    flows={"checkin": CHECKIN},
)
"""A chat persona (the default) and ``checkin``, which runs ``CHECKIN``."""


class Clock:
    """A clock the test moves: ``now`` is what the graph reads."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass(frozen=True)
class ModelCall:
    """What one ``complete`` call was asked."""

    messages: Sequence[PromptMessage]
    conversation_id: str | None
    cache_key: str | None
    tools: Sequence[ToolSpec]
    model: str | None
    streamed: bool


class ScriptedModel:
    """The ``ChatModel`` port: answers with the scripted replies (or raises the scripted
    errors) in order, then echoes the last user message; streams a reply's text in two
    pieces when asked to; records every call."""

    def __init__(self, *script: ModelReply | Exception) -> None:
        self.script = list(script)
        self.calls: list[ModelCall] = []

    async def complete(
        self,
        messages: Sequence[PromptMessage],
        *,
        conversation_id: str | None = None,
        cache_key: str | None = None,
        tools: Sequence[ToolSpec] = (),
        on_delta: DeltaSink | None = None,
        model: str | None = None,
    ) -> ModelReply:
        self.calls.append(
            ModelCall(messages, conversation_id, cache_key, tools, model, on_delta is not None)
        )
        step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        reply = step or ModelReply(
            text=f"echo: {_last_user_text(messages)}",
            model=model or "fake-model",
            input_tokens=len(messages) * 10,
            output_tokens=5,
        )
        if on_delta is not None and reply.text:
            half = len(reply.text) // 2
            for piece in (reply.text[:half], reply.text[half:]):
                await on_delta(piece)
        return reply


def tool_calls_reply(*names: str) -> ModelReply:
    """A reply that asks for one call of each named tool (ids ``call_<name>``)."""
    calls = tuple(ToolCall(id=f"call_{name}", name=name, arguments="{}") for name in names)
    return ModelReply(
        text="", model="fake-model", input_tokens=10, output_tokens=3, tool_calls=calls
    )


def _last_user_text(messages: Sequence[PromptMessage]) -> str:
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    return str(users[-1]) if users else ""


class RecordingReplies:
    """The ``ReplyChannel`` port: keeps what was sent to each ``reply_to``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, CandidateDeltaV1 | CandidateV1 | ErrorV1]] = []

    async def send(
        self, reply_to: str, event_id: str, message: CandidateDeltaV1 | CandidateV1 | ErrorV1
    ) -> None:
        self.sent.append((reply_to, event_id, message))

    def deltas(self) -> list[str]:
        return [m.delta for _, _, m in self.sent if isinstance(m, CandidateDeltaV1)]


def function(name: str) -> ToolSpec:
    """A Chat Completions tool definition named ``name``."""
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


@dataclass
class ReplyPath:
    """Every fake of the reply path, and the graph's context and runner over them."""

    memory: InMemoryMemoryStore
    model: ScriptedModel
    replies: RecordingReplies
    rounds: InMemorySchedule
    """The tool rounds' timeout schedule."""
    flow_schedule: InMemorySchedule
    checkpoints: InMemoryFlowCheckpoints
    lease: FencedLease
    erasures: InMemoryErasures
    metrics: Metrics
    clock: Clock
    context: GraphContext
    flows: FlowRunner | None = None
    runner: GraphChatRunner = field(init=False)

    def __post_init__(self) -> None:
        graph = build_graph(flows=self.flows is not None)
        self.runner = GraphChatRunner(graph=graph, context=self.context)

    def counted(self, metric: str, **labels: str) -> float:
        """A counter's value (0 when never incremented)."""
        value = self.metrics.registry.get_sample_value(f"{metric}_total", labels)
        return value or 0.0


def reply_path(
    *,
    personas: PersonaCatalog | None = None,
    flows: Mapping[str, Flow] | None = None,
    script: Sequence[ModelReply | Exception] = (),
    bounds: WindowBounds | None = None,
    max_tool_rounds: int = 5,
    input_budget: int = 8_000,
) -> ReplyPath:
    """The reply path's fakes wired into a ``GraphContext`` (a ``FlowRunner`` when
    ``flows`` is given, its personas in ``personas``)."""
    erasures = InMemoryErasures()
    lease = FencedLease()
    memory = InMemoryMemoryStore(lease=lease, erasures=erasures)
    checkpoints = InMemoryFlowCheckpoints(erasures)
    flow_schedule = InMemorySchedule()
    runner = (
        FlowRunner(flows=flows, checkpoints=checkpoints, schedule=flow_schedule, ttl_seconds=600)
        if flows
        else None
    )
    model, replies, rounds = ScriptedModel(*script), RecordingReplies(), InMemorySchedule()
    metrics, clock = Metrics(registry=CollectorRegistry()), Clock()
    context = GraphContext(
        memory=memory,
        model=model,
        model_name="fake-model",
        bounds=bounds or WindowBounds(50, 100_000),
        system_prompt="You are a helpful assistant.",
        clock=clock,
        tracer=NoOpTracer(),
        metrics=metrics,
        budget=ContextBudget(input_budget + 1_000, 1_000, 0),
        counter=default_token_counter(),
        max_tool_rounds=max_tool_rounds,
        tool_rounds=rounds,
        tool_result_timeout_seconds=120.0,
        replies=replies,
        stream_interval_seconds=0.0,
        personas=personas,
        flows=runner,
    )
    return ReplyPath(
        memory=memory,
        model=model,
        replies=replies,
        rounds=rounds,
        flow_schedule=flow_schedule,
        checkpoints=checkpoints,
        lease=lease,
        erasures=erasures,
        metrics=metrics,
        clock=clock,
        context=context,
        flows=runner,
    )


def event_id() -> str:
    return f"evt_{next(_ids):06d}"


def message(text: str, *, key: ConversationKey = KEY, **fields: Any) -> ReplyToMessage:
    """A ``message`` command with a fresh event id."""
    fields.setdefault("event_id", event_id())
    fields.setdefault("created_at", START)
    return ReplyToMessage(key=key, text=text, **fields)


def tool_result(
    call_id: str, content: str = "ok", *, key: ConversationKey = KEY, **fields: Any
) -> RecordToolResult:
    """A ``tool.result`` command answering ``call_id``."""
    fields.setdefault("event_id", event_id())
    fields.setdefault("created_at", START)
    trace = ToolTrace(tool_call_id=call_id, content=content)
    return RecordToolResult(key=key, tool=trace, **fields)


def tool_call(call_id: str, name: str, *, key: ConversationKey = KEY) -> RecordToolCall:
    """A ``tool.call`` command (a call the client's own model made)."""
    trace = ToolTrace(tool_call_id=call_id, name=name, arguments='{"q": 1}')
    return RecordToolCall(event_id=event_id(), key=key, created_at=START, tool=trace)


def transcript(*said: tuple[str, str], key: ConversationKey = KEY) -> ImportTranscript:
    """A ``transcript`` command of (role, text) pairs."""
    messages = tuple(
        TranscriptMessage.model_validate({"role": role, "text": text}) for role, text in said
    )
    return ImportTranscript(event_id=event_id(), key=key, created_at=START, transcript=messages)
