"""Runs a conversation's flow (SPEC 5.10) on the flow graph, checkpointed in Redis under
the user's hash tag (``RedisKeys.flow``), with its expiry scheduled for the worker's sweep.

Called under the conversation's lease, so one reply at a time advances a flow. What makes a
crash anywhere harmless:

- a reply is applied once: the flow remembers the event that advanced it last, and a
  redelivery of that event (its memory commit did not happen) gets the same prompt back
  without advancing again;
- the checkpoint of an ended flow is deleted (``finish``) only after the turn that ended
  it was committed and its result published; a redelivery that still finds it publishes
  the result (again, same id), one that does not knows it went out. ``finish`` deletes
  only the flow it was asked to (a newer flow of the conversation stays);
- an erasure that began while the reply was applied wins: the write is checked against
  the user's erasure mark afterwards and removed (the commit would be refused anyway).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, cast

import structlog
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from llm_bot.contract import FlowResultV1
from llm_bot.contract.messages import flow_result_id
from llm_bot.errors import ErasedMeanwhile, LlmBotError
from llm_bot.flows.answers import NOT_ANSWERED, Answer
from llm_bot.flows.definitions import Flow, Question
from llm_bot.flows.flow_graph import build_flow_graph
from llm_bot.flows.progress import FlowState, flow_result, opening, valid_value
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ConversationSchedule, StructuredModel

log = structlog.get_logger(__name__)

FLOW_CHECKPOINT_GRACE_SECONDS = 86_400
"""How long a flow's checkpoint outlives its expiry, for the sweep to report it: a flow
whose worker never came is still dropped by Redis in the end."""

INTERPRETER_INSTRUCTIONS = (
    "You read a person's reply to one question of a questionnaire. Answer with JSON: "
    '{"value": <the answer>} where the answer has the type the question asks for, or '
    '{"value": null} when the reply does not clearly answer the question. Never guess.'
)


class FlowCheckpoints(Protocol):
    """Where conversations' flows are checkpointed, one thread per conversation
    (``adapters/redis_flow_checkpoints.py``)."""

    @property
    def saver(self) -> BaseCheckpointSaver[str]:
        """The flow graph's LangGraph checkpointer."""
        ...

    def thread_id(self, key: ConversationKey) -> str:
        """The conversation's checkpoint thread."""
        ...

    async def exists(self, key: ConversationKey) -> bool:
        """Whether the conversation has a checkpoint, without reading it."""
        ...

    async def delete(self, key: ConversationKey) -> None:
        """Drop the conversation's checkpoint."""
        ...

    async def erasure_generation(self, key: ConversationKey) -> str:
        """The user's erasure generation now; ``ErasedMeanwhile`` while one is erased."""
        ...


@dataclass(frozen=True)
class FlowStart:
    """The flow a message asks for, when none is running."""

    flow: str
    persona: str


@dataclass(frozen=True)
class FlowTurn:
    """What one reply did to a flow: the bot's next words, and the result if it ended."""

    flow: str
    text: str
    result: FlowResultV1 | None = None
    replayed: bool = False
    """The reply had been applied already (a redelivery): nothing changed."""


class FlowRunner:
    """Starts, advances, finishes and expires conversations' flows."""

    def __init__(
        self,
        *,
        flows: Mapping[str, Flow],
        checkpoints: FlowCheckpoints,
        schedule: ConversationSchedule,
        ttl_seconds: int,
        interpreter: StructuredModel | None = None,
    ) -> None:
        """``checkpoints``: kept ``FLOW_CHECKPOINT_GRACE_SECONDS`` past ``ttl_seconds``;
        ``schedule``: when each running flow expires (``RedisKeys.flows``)."""
        self._flows = flows
        self._checkpoints = checkpoints
        self._schedule = schedule
        self._ttl = ttl_seconds
        self._interpreter = interpreter
        self._graph = build_flow_graph(
            flows, checkpoints.saver, self._interpret if interpreter is not None else None
        )

    async def state(self, key: ConversationKey) -> FlowState | None:
        """The conversation's flow as last checkpointed (running or just ended), or None."""
        snapshot = await self._graph.aget_state(self._config(key))
        return cast("FlowState", snapshot.values) if snapshot.values else None

    async def takes(self, key: ConversationKey, event_id: str) -> bool:
        """Whether a message goes to the conversation's flow: one is running, or this
        very event ended it (a redelivery). Most messages are in no flow: for them this is
        one ``EXISTS``, without LangGraph reading a checkpoint."""
        if not await self._checkpoints.exists(key):
            return False
        state = await self.state(key)
        return state is not None and (
            state["status"] == "running" or state["last_event"] == event_id
        )

    async def turn(
        self,
        key: ConversationKey,
        *,
        event_id: str,
        text: str,
        now: datetime,
        start: FlowStart | None,
        erasure: str,
    ) -> FlowTurn:
        """Apply a message to the conversation's flow: resume the running one with it, or
        start ``start``'s flow (its first question is the reply; the message is not an
        answer). ``erasure``: the user's erasure generation as ``recall`` read it."""
        state = await self.state(key)
        at = now.isoformat()
        replayed = state is not None and state["last_event"] == event_id
        if state is not None and replayed:
            after = state  # a redelivery: applied already
        elif state is not None and state["status"] == "running":
            resumed = {"event_id": event_id, "text": text, "at": at}
            values = await self._graph.ainvoke(Command(resume=resumed), self._config(key))
            after = _state_of(values)
        elif start is not None:
            if state is not None:  # an ended flow whose finish was cut short
                await self._checkpoints.delete(key)
            after = opening(
                self._flows[start.flow],
                flow_id=flow_result_id(key.tenant_id, key.user_id, event_id),
                name=start.flow,
                persona=start.persona,
                event_id=event_id,
                at=at,
            )
            await self._graph.ainvoke(after, self._config(key))
        else:
            raise LookupError("no flow is running and none was asked for")
        await self._refuse_if_erased(key, erasure)
        if after["status"] == "running":
            deadline = datetime.fromisoformat(after["updated_at"]).timestamp() + self._ttl
            await self._schedule.schedule(key, deadline)
            return FlowTurn(after["flow"], after["prompt"], replayed=replayed)
        finished_at = datetime.fromisoformat(after["updated_at"])
        status: Literal["completed", "exited"] = (
            "completed" if after["status"] == "completed" else "exited"
        )
        result = flow_result(
            self._flows.get(after["flow"]), after, key, status=status, finished_at=finished_at
        )
        return FlowTurn(after["flow"], after["prompt"], result, replayed=replayed)

    async def holds(self, key: ConversationKey, flow_id: str) -> bool:
        """Whether the conversation's checkpoint is still the flow ``flow_id``'s."""
        state = await self.state(key)
        return state is not None and state["id"] == flow_id

    async def finish(self, key: ConversationKey, flow_id: str) -> None:
        """Delete the checkpoint of the flow ``flow_id`` (not of a newer flow) and its
        expiry entry. Safe to repeat."""
        state = await self.state(key)
        if state is None or state["id"] == flow_id:
            await self._checkpoints.delete(key)
            await self._schedule.unschedule(key)

    async def expired(self, key: ConversationKey, now: datetime) -> FlowResultV1 | None:
        """The ``expired`` result of the conversation's flow if it has been waiting for a
        reply longer than the TTL by ``now`` (then publish it and ``finish``); else None,
        and the expiry entry is put right (dropped, or moved to the flow's real expiry)."""
        state = await self.state(key)
        if state is None or state["status"] != "running":
            await self._schedule.unschedule_due(key, now.timestamp())
            return None
        deadline = datetime.fromisoformat(state["updated_at"]).timestamp() + self._ttl
        if deadline > now.timestamp():
            await self._schedule.schedule(key, deadline)
            return None
        flow = self._flows.get(state["flow"])  # None: it left the personas file meanwhile
        return flow_result(flow, state, key, status="expired", finished_at=now)

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]:
        """Conversations whose flow expires by ``now`` (at most ``limit``)."""
        return await self._schedule.due(now, limit)

    def _config(self, key: ConversationKey) -> RunnableConfig:
        return {"configurable": {"thread_id": self._checkpoints.thread_id(key)}}

    async def _refuse_if_erased(self, key: ConversationKey, erasure: str) -> None:
        try:
            now = await self._checkpoints.erasure_generation(key)
            unchanged = now == erasure
        except ErasedMeanwhile:
            unchanged = False
        if not unchanged:
            await self._checkpoints.delete(key)
            raise ErasedMeanwhile("the user's memory was erased while the flow advanced")

    async def _interpret(self, question: Question, text: str) -> Answer:
        """The model's structured reading of an ambiguous reply, checked like any answer;
        a model failure or an invalid value is no answer (the question is asked again)."""
        assert self._interpreter is not None  # noqa: S101  # only wired with one
        try:
            reply = await self._interpreter.complete_json(
                [
                    {"role": "system", "content": INTERPRETER_INSTRUCTIONS},
                    {"role": "user", "content": _interpretation_request(question, text)},
                ],
                schema_name="flow_answer",
                schema=_answer_schema(question),
            )
        except LlmBotError as exc:
            log.info("flow.interpretation_failed", reason=exc.code)
            return NOT_ANSWERED
        value = _json_value(reply.text)
        checked = valid_value(question, value)
        return Answer(checked) if checked is not None else NOT_ANSWERED


def _state_of(values: Mapping[str, Any]) -> FlowState:
    return cast("FlowState", {k: v for k, v in values.items() if not k.startswith("__")})


def _interpretation_request(question: Question, text: str) -> str:
    kinds = {
        "scale": "an integer from 1 to 10",
        "boolean": "true or false",
        "choice": f"exactly one of {question.options}",
        "text": "a short text",
    }
    return f"Question: {question.text}\nExpected: {kinds[question.type]}\nReply: {text}"


def _answer_schema(question: Question) -> dict[str, Any]:
    kinds: dict[str, dict[str, Any]] = {
        "scale": {"type": ["integer", "null"], "minimum": 1, "maximum": 10},
        "boolean": {"type": ["boolean", "null"]},
        "choice": {"enum": [*(question.options or []), None]},
        "text": {"type": ["string", "null"]},
    }
    value = kinds[question.type]
    return {
        "type": "object",
        "properties": {"value": value},
        "required": ["value"],
        "additionalProperties": False,
    }


def _json_value(text: str) -> object:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed.get("value") if isinstance(parsed, dict) else None
