"""The event handler: delivery in, outcome out. Knows nothing of aio-pika.

Events of one conversation are processed one at a time: within this process by an
``asyncio.Lock`` per conversation (FIFO, so in delivery order), across processes by a
lease in Redis; the memory commit's fencing and version checks refuse a lost update even
if a lease expired.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, assert_never

import structlog

from llm_bot.contract import InternalEventV2, MemoryJobV1
from llm_bot.contract.messages import derived_id
from llm_bot.errors import LlmBotError, RetryableError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ConversationLease
from llm_bot.service.chat_runs import ChatRunner, Route
from llm_bot.service.commands import (
    ChatEvent,
    EndConversation,
    ForgetMemory,
    ImportTranscript,
    RecordToolCall,
    RecordToolResult,
    ReplyToMessage,
    command_for,
)
from llm_bot.service.conversation_locks import ConversationLocks
from llm_bot.service.erasure import Eraser
from llm_bot.service.flow_runner import FlowRunner
from llm_bot.service.outcomes import (
    DeadLetter,
    Duplicate,
    EventIds,
    LetGo,
    Outcome,
    Recorded,
    Refused,
    Replied,
    Skipped,
    flow_result_of,
    outcome_for_error,
)
from llm_bot.service.parsing import parse_event, readable_ids
from llm_bot.service.retry import Exhausted, RetryPolicy, with_retries
from llm_bot.service.token_spending import charged_to
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Delivery:
    """A message as the broker handed it over, stripped of broker types."""

    body: bytes
    headers: Mapping[str, Any] = field(default_factory=dict)
    redelivered: bool = False
    fault: str | None = None
    """Why the properties or headers are unusable (the transport checks them), or None."""
    reply_to: str | None = None
    """The AMQP ``reply_to`` address: the reply streams there (CandidateDeltaV1) as well."""
    lease_token: str | None = None
    """The conversation's lease, when the delivery comes with it (the fair queue takes a
    conversation with its lease and keeps it renewed); None: the handler takes it."""
    still_ours: Callable[[], Awaitable[bool]] | None = None
    """With ``lease_token``: asked before every retry (and before a terminal outcome)
    whether the event is still this taker's, taking the lease again if it lapsed. False:
    the event is let go (``LetGo``), never retried on a lease another taker holds."""


class _NotOurs(Exception):  # a signal, not an error
    """The event went to another taker between two attempts."""


class DeliveryHandler(Protocol):
    """Turns a delivery into an outcome; never raises but for cancellation."""

    async def handle(self, delivery: Delivery) -> Outcome: ...


class EventHandler:
    """Validates an event, routes it by type, runs the graph, names the outcome.

    Transient failures are retried in place with backoff (the delivery stays unacked, its
    prefetch slot busy, other deliveries go on) while this process keeps the conversation
    locked, so later events of the conversation wait behind the retried one.
    """

    def __init__(
        self,
        *,
        chats: ChatRunner,
        flows: FlowRunner | None,
        lease: ConversationLease,
        eraser: Eraser,
        retry: RetryPolicy,
        max_body_bytes: int,
        log_content: bool,
        metrics: Metrics,
    ) -> None:
        self._metrics = metrics
        self._chats = chats
        self._flows = flows
        self._lease = lease
        self._eraser = eraser
        self._retry = retry
        self._max_body_bytes = max_body_bytes
        self._log_content = log_content
        self._locks = ConversationLocks()

    async def handle(self, delivery: Delivery) -> Outcome:
        """Never raises (but for cancellation): every failure becomes a ``DeadLetter``."""
        ids: EventIds | None = None
        try:
            event = parse_event(
                delivery.body, max_bytes=self._max_body_bytes, envelope_fault=delivery.fault
            )
            ids = EventIds(event.id, event.tenant_id, event.user_id, event.conversation_id)
            structlog.contextvars.bind_contextvars(
                event_id=event.id,
                tenant_id=event.tenant_id,
                conversation_id=event.conversation_id,
                event_type=event.type,
            )
            return await self._with_retries(event, ids, first_attempt(delivery), delivery)
        except Exception as exc:  # noqa: BLE001  # the one place errors become outcomes
            if ids is None:
                ids = readable_ids(delivery.body, max_bytes=self._max_body_bytes)
            return self._terminal(exc, ids, attempts=first_attempt(delivery))

    async def published(self, outcome: Outcome) -> None:
        """After the outcome's publishes were confirmed: the checkpoint of the flow it ended
        goes (so a redelivery finds it gone and does not publish its result again). Never
        raises: a checkpoint left behind routes nothing (the flow has ended) and expires."""
        result = flow_result_of(outcome)
        flows = self._flows
        if result is None or flows is None:
            return
        key = ConversationKey(result.tenant_id, result.user_id, result.conversation_id)
        try:
            await flows.finish(key, result.id)
        except LlmBotError as exc:
            log.warning("flow.finish_failed", **log_fields(exc))

    def _terminal(
        self, exc: Exception, ids: EventIds | None, *, attempts: int
    ) -> DeadLetter | Refused:
        outcome = outcome_for_error(exc, ids=ids, attempts=attempts)
        if isinstance(outcome, Refused):  # the tenant's token budget is spent: no DLQ
            log.info("event.refused", code="budget_exceeded", error=outcome.message)
            return outcome
        log.warning(
            "event.failed",
            code=outcome.code,
            **log_fields(exc),
            attempts=attempts,
            exc_info=outcome.code == "internal" and not isinstance(exc, LlmBotError),
        )
        return outcome

    async def _with_retries(
        self, event: InternalEventV2, ids: EventIds, attempt: int, delivery: Delivery
    ) -> Outcome:
        key = ConversationKey(event.tenant_id, event.user_id, event.conversation_id)
        tries = 0

        async def once() -> Outcome:
            nonlocal tries
            tries += 1
            if tries > 1 and not await _still_ours(delivery):
                raise _NotOurs
            return await self._dispatch(event, delivery)

        async with self._locks.hold(key):
            with charged_to(event.tenant_id):  # every model call below is the tenant's
                try:
                    result = await with_retries(
                        once, policy=self._retry, attempt=attempt, on_retry=self._on_retry
                    )
                except _NotOurs:
                    return self._let_go(attempt + tries - 2)
        if isinstance(result, Exhausted):
            if not await _still_ours(delivery):  # another taker answers it: no ErrorV1 here
                return self._let_go(result.attempts)
            return self._terminal(result.error, ids, attempts=result.attempts)
        return result

    def _let_go(self, attempts: int) -> LetGo:
        log.warning("event.let_go", reason="lease_lost", attempts=attempts)
        return LetGo("the conversation's lease is another taker's", attempts)

    def _on_retry(self, attempt: int, error: RetryableError, delay: float) -> None:
        log.warning(
            "event.retrying",
            attempt=attempt,
            code=error.code,
            **log_fields(error),
            delay_seconds=round(delay, 3),
        )
        self._metrics.retried()

    async def _dispatch(self, event: InternalEventV2, delivery: Delivery) -> Outcome:
        """The command's own handling; mypy checks every command kind has a case."""
        command = command_for(event)
        match command:
            case ReplyToMessage() | ImportTranscript() | RecordToolCall() | RecordToolResult():
                if delivery.reply_to:
                    command = dataclasses.replace(command, reply_to=delivery.reply_to)
                return await self._chat(command, delivery.lease_token)
            case ForgetMemory():
                deleted = await self._eraser.forget(
                    command.tenant_id,
                    command.user_id,
                    command.conversation_id,
                    asked_at=command.created_at,
                )
                return Recorded(f"erased {deleted} keys")
            case EndConversation():
                return Recorded("finalization queued", job=finalize_job(command.event))
            case _:
                assert_never(command)

    async def _chat(self, command: ChatEvent, lease_token: str | None) -> Outcome:
        text = command.text if isinstance(command, ReplyToMessage) else ""
        text_fields = {"text": text} if self._log_content else {}
        log.info("event.received", prompt_chars=len(text), **text_fields)
        return await self._run_graph(command, lease_token)

    async def _run_graph(self, command: ChatEvent, lease_token: str | None) -> Outcome:
        held = (
            contextlib.nullcontext(lease_token)
            if lease_token is not None
            else self._lease.hold(command.key)
        )
        async with held as token:
            run = await self._chats.run(command, token)
        match run.route:
            case Route.SKIP:
                return Skipped("no prompt text")
            case Route.DUPLICATE:
                return Duplicate(run.candidate, job=run.job, flow_result=run.flow_result)
            case Route.TOOL:
                return Recorded(f"{command.event_type} recorded in turn {run.turn}")
            case Route.TOOL_DUPLICATE:
                return Skipped("tool result for a call already answered")
            case Route.TRANSCRIPT:
                messages = len(command.transcript) if isinstance(command, ImportTranscript) else 0
                return Recorded(
                    f"transcript: {messages} messages recorded through turn {run.turn}",
                    job=run.job,
                )
            case Route.REPLY | Route.CONTINUE | Route.FLOW:
                if run.candidate is None:
                    raise TypeError(f"the reply graph's route {run.route!r} made no candidate")
                return Replied(run.candidate, job=run.job, flow_result=run.flow_result)
            case _:
                assert_never(run.route)


async def _still_ours(delivery: Delivery) -> bool:
    """Whether a taken event may be tried again here; True when it cannot be told (Redis
    down: then nobody else can take it either)."""
    if delivery.still_ours is None:
        return True
    try:
        return await delivery.still_ours()
    except LlmBotError:
        return True


def first_attempt(delivery: Delivery) -> int:
    """This delivery's attempt number: 1 + earlier deliveries (quorum ``x-delivery-count``)."""
    return 1 + earlier_deliveries(delivery.headers)


def earlier_deliveries(headers: Mapping[str, Any]) -> int:
    """How often a message was delivered before (its ``x-delivery-count`` header)."""
    try:
        earlier = int(headers.get("x-delivery-count", 0) or 0)
    except (TypeError, ValueError):
        earlier = 0
    return max(earlier, 0)


def finalize_job(event: InternalEventV2) -> MemoryJobV1:
    """The memory worker's job for ``conversation.end``."""
    return MemoryJobV1(
        id=derived_id("fin", event.id),
        kind="finalize",
        tenant_id=event.tenant_id,
        user_id=event.user_id,
        conversation_id=event.conversation_id,
        turn=0,
        event_id=event.id,
        created_at=event.created_at,
    )
