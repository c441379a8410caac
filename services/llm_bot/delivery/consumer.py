"""The ingress consumer: deliveries → handler → broker actions.

Manual acks; up to ``LLM_BOT_PREFETCH`` deliveries in flight, each processed in its own
task. An event is settled only after its outcome's publishes are confirmed (and, for a
reply, after memory was committed by the graph). If acting on an outcome fails, the
delivery is rejected without requeue, so it is dead-lettered: nothing is lost and
nothing loops.

With ``fairness`` (the ingress of ``llm-bot run``), valid deliveries are handed to the
fair queue in Redis, which schedules them, and stay unacked until answered
(``fair_dispatch.py``); what the dispatcher takes comes back here to be processed the same
way, settled through the fair queue (``settlements.py``). Invalid deliveries are processed
here at once.

The service's ingress is ``LLM_BOT_INGRESS_PARTITIONS`` queues with a single active
consumer each (``rabbit_topology.py``): every replica consumes every partition, and the
broker delivers each partition to one of them at a time, in publish order; admission keeps
that order in each conversation's list in Redis, from which every replica processes. So a
replica never cancels a partition's consumer while it holds deliveries it has not admitted:
on 3.10, the next consumer would be active at once and those deliveries, given back, would
reach it behind later ones. It stops by closing its connection instead, which gives back
everything it holds, in order, before the next consumer gets anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import assert_never

import structlog
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aiormq.exceptions import ChannelPreconditionFailed
from opentelemetry.trace import SpanKind, Tracer

from llm_bot.adapters import amqp_text
from llm_bot.adapters.amqp_text import envelope_fault, text_properties
from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.rabbit_connection import connect_amqp_robust
from llm_bot.adapters.rabbit_overflow import declare_overflow, move_to_overflow
from llm_bot.adapters.rabbit_partitions import unbind_old_layout
from llm_bot.adapters.rabbit_publisher import RabbitPublisher
from llm_bot.adapters.rabbit_replies import RabbitReplies
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.contract import CandidateV1, FlowResultV1, InternalEventV2, MemoryJobV1
from llm_bot.delivery.fair_dispatch import FairDispatcher, Fairness, StillOurs
from llm_bot.delivery.process_tuning import CONSUMING_TUNING
from llm_bot.delivery.settlements import RabbitSettlement, Settlement
from llm_bot.delivery.subscriptions import subscribe
from llm_bot.delivery.unanswered import Offered
from llm_bot.errors import DependencyUnavailable, PublishFailed, log_fields
from llm_bot.header_text import undecodable
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.broker_actions import (
    BrokerAction,
    CopyToDeadLetters,
    PublishCandidate,
    PublishError,
    PublishFlowResult,
    PublishJob,
    broker_actions,
)
from llm_bot.service.handler import Delivery, DeliveryHandler
from llm_bot.service.outcomes import (
    DeadLetter,
    EventIds,
    LetGo,
    Outcome,
    Refused,
    candidate_of,
)
from llm_bot.service.parsing import readable_ids
from llm_bot.service.retry import RetryPolicy
from llm_bot.telemetry.metrics import Metrics
from llm_bot.telemetry.tracing import extract_context, inject_context

PUBLISH_RETRY = RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=2.0)
RECONNECT_INTERVAL_SECONDS = 1.0  # aio-pika's default 5 s dominated recovery after a restart
REDELIVERY_DELAY_SECONDS = 1.0
"""A held delivery whose channel died is taken again after this (the broker reconnects)."""
OLD_LAYOUT_LOOK_SECONDS = 30.0
"""How often the ingress queues of another layout are looked for (a replica of the old
version, restarted during a rolling upgrade, binds its queue again)."""

log = structlog.get_logger(__name__)


class EventConsumer:
    """Consumes the ingress queue until stopped."""

    def __init__(
        self,
        *,
        amqp_url: str,
        topology: Topology,
        handler: DeliveryHandler,
        prefetch: int,
        tracer: Tracer,
        metrics: Metrics,
        replies: RabbitReplies | None = None,
        after_publish: Callable[[Outcome], Awaitable[None]] | None = None,
        fairness: Fairness | None = None,
    ) -> None:
        """``after_publish``: what must follow the outcome's confirmed publishes, before the
        ack (the end of a flow: its checkpoint is deleted only once its result is out)."""
        self._after_publish = after_publish
        self._fairness = fairness
        self._dispatcher: FairDispatcher | None = None
        self._tracer = tracer
        self._replies = replies
        self._metrics = metrics
        self._amqp_url = amqp_url
        self._topology = topology
        self._handler = handler
        self._prefetch = prefetch
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._queue: AbstractQueue | None = None
        self._consumer_tag: str | None = None
        self._consuming: dict[str, tuple[AbstractQueue, str]] = {}
        """Every queue consumed: name -> (queue, consumer tag)."""
        self._draining: set[str] = set()
        self._old_layout: asyncio.Task[None] | None = None
        self._stopping = False
        self._replica = uuid.uuid4().hex
        self._publisher: RabbitPublisher | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._gc_held = False

    @property
    def in_flight(self) -> int:
        waiting = self._dispatcher.in_flight if self._dispatcher is not None else 0
        return len(self._tasks) + waiting

    async def publish_job(self, job: MemoryJobV1) -> None:
        """Publish a memory job (confirmed), for the worker's idle sweep."""
        await self._with_publish_retries(lambda: self._require_publisher().publish_memory_job(job))

    async def publish_event(self, event: InternalEventV2) -> None:
        """Publish an event to the service's ingress (confirmed): the worker's tool results
        for calls that timed out."""
        await self._with_publish_retries(lambda: self._require_publisher().publish_event(event))

    async def publish_flow_result(self, result: FlowResultV1) -> None:
        """Publish a flow's result (confirmed): the worker's expired flows."""
        await self._with_publish_retries(
            lambda: self._require_publisher().publish_flow_result(result)
        )

    def readiness(self) -> str | None:
        """None when connected and consuming, else why not (for ``/readyz``)."""
        if self._connection is None or self._consumer_tag is None:
            return "not consuming"
        if not self._connection.connected.is_set():
            return "broker connection down (reconnecting)"
        if self._channel is None or self._channel.is_closed:
            return "broker channel closed (reopening)"
        return None

    async def start(self) -> None:
        """Connect (robustly: reconnects and re-declares by itself), declare, consume."""
        amqp_text.install()  # a delivery pamqp cannot decode must not drop the connection
        self._connection = await connect_amqp_robust(
            self._amqp_url,
            client_properties={"connection_name": f"llm-bot {self._topology.ingress_queue}"},
            reconnect_interval=RECONNECT_INTERVAL_SECONDS,
        )
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        self._channel = channel
        window = self._prefetch
        if self._fairness is not None:  # a replica active on every partition holds it all
            share = math.ceil(self._fairness.max_waiting / self._topology.ingress_partitions)
            window = max(self._prefetch, share)
        await channel.set_qos(prefetch_count=window)  # per consumer: per partition
        try:
            declared = await declare_topology(channel, self._topology)
            overflow = await self._open_overflow()
        except ChannelPreconditionFailed as exc:
            raise DependencyUnavailable(
                f"RabbitMQ refused the topology ({exc.args[0] if exc.args else exc}); a queue "
                "exists with other arguments: delete it or change it with a policy"
            ) from exc
        self._publisher = RabbitPublisher(
            exchange=declared.exchange,
            dlx=declared.dlx,
            candidate_routing_key=self._topology.candidate_routing_key,
            error_routing_key=self._topology.error_routing_key,
            dead_letter_routing_key=self._topology.ingress_routing_key,
            memory_routing_key=self._topology.memory_routing_key,
            events_routing_key=self._topology.service_routing_key(),
            flow_result_routing_key=self._topology.flow_result_routing_key,
        )
        if self._replies is not None:  # best effort: its own channel, no confirms to wait for
            reply_channel = await self._connection.channel(publisher_confirms=False)
            self._replies.bind(reply_channel.default_exchange)
        self._queue = declared.ingress
        for name in declared.unordered:
            log.warning("ingress.queue_without_single_active_consumer", queue=name)
        if self._fairness is not None:
            fairness = self._fairness
            if overflow:
                fairness = dataclasses.replace(fairness, overflow=self._move_to_overflow)
            self._dispatcher = FairDispatcher(
                fairness=fairness,
                process=self._process_held,
                dead_letter=self._dead_letter_copy,
                metrics=self._metrics,
            )
            self._dispatcher.start()
        replica = self._replica if self._topology.single_active else None
        self._consuming.update(
            await subscribe(declared.partitions, self._on_message, replica=replica)
        )
        on_overflow = functools.partial(self._on_message, overflowed=True)
        self._consuming.update(await subscribe(overflow, on_overflow, replica=self._replica))
        self._consumer_tag = self._consuming[self._queue.name][1]
        self._metrics.ingress_queues.labels("partition").set(
            len(declared.partitions) - len(declared.unordered)
        )
        self._metrics.ingress_queues.labels("unordered").set(len(declared.unordered))
        if self._topology.single_active:  # the service's ingress, not the memory worker's
            try:
                await self._drain_old_layout()
            except Exception:  # looked for again by the loop
                log.warning("ingress.old_layout_look_failed", exc_info=True)
            self._old_layout = asyncio.create_task(self._old_layout_loop(), name="old-layout")
        if not self._gc_held:  # start-up is over: the collector tuned for consuming
            CONSUMING_TUNING.hold()
            self._gc_held = True
        log.info(
            "consumer.started",
            queue=self._topology.ingress_queue,
            partitions=self._topology.ingress_partitions,
            prefetch=self._prefetch,
        )

    async def _old_layout_loop(self) -> None:
        while True:
            await asyncio.sleep(OLD_LAYOUT_LOOK_SECONDS)
            try:
                await self._drain_old_layout()
            except Exception:  # the loop must outlive any one failure
                log.warning("ingress.old_layout_look_failed", exc_info=True)

    async def _drain_old_layout(self) -> None:
        """Unbind the ingress queues of another layout and consume each until it is
        deleted (their events are not lost: docs/deployment.md, "Ingress partitions")."""
        found = await unbind_old_layout(self._amqp_url, self._topology)
        self._draining &= set(found)
        channel = self._channel
        for name in found:
            if name in self._draining or channel is None or channel.is_closed:
                continue
            # Not robust: a drained queue the operator deletes must not be declared again
            # on a reconnect (the next look consumes it again while it exists).
            queue = await channel.declare_queue(name, passive=True, robust=False)
            await queue.consume(self._on_message, no_ack=False)
            self._draining.add(name)
            log.info("ingress.draining_old_queue", queue=name)
        self._metrics.ingress_queues.labels("draining").set(len(self._draining))

    async def stop(self, *, grace_seconds: float) -> None:
        """Stop taking deliveries, let in-flight work finish within the grace period,
        requeue the rest, close the connection.

        Single-active-consumer queues are not cancelled: what arrives meanwhile stays
        unacked, and closing the connection gives it all back in order before the next
        consumer is active (a cancel would make it active at once, ahead of the
        deliveries given back after)."""
        self._stopping = True
        if self._old_layout is not None:
            self._old_layout.cancel()
        if not self._topology.single_active:
            for queue, tag in self._consuming.values():
                with contextlib.suppress(Exception):
                    await queue.cancel(tag)
        running = set(self._tasks)
        if self._dispatcher is not None:
            give_back = not self._topology.single_active
            running |= await self._dispatcher.stop_taking(give_back=give_back)
        if running:
            _, pending = await asyncio.wait(running, timeout=grace_seconds)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                log.warning("consumer.requeued_on_shutdown", count=len(pending))
        if self._gc_held:
            self._gc_held = False
            CONSUMING_TUNING.release()
        if self._connection is not None:
            await self._connection.close()
        log.info("consumer.stopped")

    async def _open_overflow(self) -> tuple[AbstractQueue, ...]:
        """The service's overflow queues, on a channel of their own: its window (a tenant's
        bound) is apart from the partitions' (``rabbit_overflow.py``)."""
        if not self._topology.overflow_queues() or self._connection is None:
            return ()
        channel = await self._connection.channel(publisher_confirms=False)
        bound = self._fairness.tenant_max_waiting if self._fairness else self._prefetch
        await channel.set_qos(prefetch_count=max(self._prefetch, bound))
        return await declare_overflow(channel, self._topology)

    async def _move_to_overflow(self, offered: Sequence[Offered]) -> list[bool]:
        channel = self._channel
        if channel is None or channel.is_closed:
            return [False] * len(offered)
        moves = [(one.key.tenant_id, one.held) for one in offered]
        return await move_to_overflow(channel, self._topology, moves)

    async def _on_message(
        self, message: AbstractIncomingMessage, *, overflowed: bool = False
    ) -> None:
        """A delivery of a partition, or (``overflowed``) of an overflow queue."""
        if self._stopping:  # left unacked: given back when the connection closes
            return
        held = HeldMessage.of(message, received_at=time.time())
        fault = envelope_fault(text_properties(message), held.headers)
        if self._dispatcher is not None and fault is None:
            ids = self._ids_of(held.body)
            if ids is not None:
                key = ConversationKey(ids.tenant_id, ids.user_id, ids.conversation_id)
                self._dispatcher.offer(
                    message, held, key, event_id=ids.event_id, overflowed=overflowed
                )
                return
        settlement = RabbitSettlement(message)
        work = self._process_held(held, settlement, None, None, fault=fault)
        if self._dispatcher is not None:  # it takes a slot like any other event
            work = self._dispatcher.in_a_slot(work)
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ids_of(self, body: bytes) -> EventIds | None:
        """The ids of an event whose ids can be read (None: the handler says at once what
        is wrong). Only the ids are read here, not the schema: admission is the cost every
        event of a backlog pays before a quiet tenant's event is reached; the handler
        validates the rest when the event's turn comes."""
        assert self._fairness is not None  # noqa: S101  # only called with fairness on
        return readable_ids(body, max_bytes=self._fairness.max_body_bytes)

    async def _process_held(
        self,
        held: HeldMessage,
        settlement: Settlement,
        lease_token: str | None,
        verdict: Outcome | None,
        still_ours: StillOurs | None = None,
        *,
        fault: str | None = None,
    ) -> None:
        """Handle (unless a ``verdict`` is given), act on the outcome, settle (nothing of
        either when the event was let go to another taker)."""
        structlog.contextvars.clear_contextvars()
        started = time.perf_counter()
        self._metrics.in_flight.inc()
        try:
            with self._tracer.start_as_current_span(
                f"process {self._topology.exchange}:{self._topology.ingress_routing_key}",
                context=extract_context(held.headers),
                kind=SpanKind.CONSUMER,
                attributes=self._consumer_attributes(held),
            ) as span:
                delivery = Delivery(
                    body=held.body,
                    headers=held.headers,
                    redelivered=held.redelivered,
                    fault=fault,
                    reply_to=_reply_address(held),
                    lease_token=lease_token,
                    still_ours=still_ours,
                )
                outcome = verdict or await self._handler.handle(delivery)
                span.set_attribute("llmbot.outcome", outcome.name)
                if not isinstance(outcome, LetGo):
                    await self._act(held, settlement, outcome, delivery.reply_to)
            code = outcome.code if isinstance(outcome, DeadLetter) else None
            self._metrics.event_done(outcome.name, time.perf_counter() - started, code=code)
        except asyncio.CancelledError:
            await settlement.requeue()
            raise
        except Exception:
            if self._channel_closed():
                # The delivery died with its channel: it is delivered or taken again, and
                # the processed record makes the retry republish the same candidate.
                log.warning("delivery.left_for_redelivery", exc_info=True)
                await settlement.requeue(delay=REDELIVERY_DELAY_SECONDS)
                return
            log.exception("delivery.action_failed")
            await settlement.reject()
        finally:
            self._metrics.in_flight.dec()

    async def _dead_letter_copy(self, held: HeldMessage) -> None:
        """A held delivery whose outcome could not be acted on, to the dead letters."""
        publisher = self._require_publisher()
        await self._with_publish_retries(
            lambda: publisher.dead_letter(
                held, code="internal", reason="acting on the outcome failed", attempts=1
            )
        )

    def _consumer_attributes(self, message: HeldMessage) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {
            "messaging.system": "rabbitmq",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": self._topology.exchange,
            "messaging.rabbitmq.destination.routing_key": self._topology.ingress_routing_key,
            "messaging.consumer.group.name": self._topology.ingress_queue,
            "messaging.message.body.size": len(message.body),
        }
        if message.message_id and not undecodable(message.message_id):
            attributes["messaging.message.id"] = message.message_id
        if message.correlation_id and not undecodable(message.correlation_id):
            attributes["messaging.message.conversation_id"] = message.correlation_id
        return attributes

    async def _act(
        self, message: HeldMessage, settlement: Settlement, outcome: Outcome, reply_to: str | None
    ) -> None:
        """Carry out ``broker_actions(outcome)`` (confirmed, retried briefly), then ack.

        If a publish keeps failing on a live channel (for example an unroutable candidate),
        the event is dead-lettered with code ``internal``; its memory stays committed, so a
        replay republishes the same candidate. Memory jobs go out only after the rest.
        """
        actions = broker_actions(outcome)
        essential = [a for a in actions if not isinstance(a, PublishJob)]
        jobs = [a for a in actions if isinstance(a, PublishJob)]
        try:
            await self._with_publish_retries(lambda: self._perform(message, essential, reply_to))
        except PublishFailed as exc:
            if self._channel_closed():
                raise
            log.warning("outcome.publish_failed", **log_fields(exc), outcome=outcome.name)
            failure = DeadLetter(
                code="internal", message=str(exc), attempts=1, ids=_ids_of(outcome)
            )
            failed = broker_actions(failure)
            await self._with_publish_retries(lambda: self._perform(message, failed))
            if reply_to is not None:
                await self._reply(reply_to, failed)
        else:
            if reply_to is not None:
                await self._reply(reply_to, essential)
            if self._after_publish is not None:  # before the ack, after the requester's reply
                await self._after_publish(outcome)
            await self._perform(message, jobs)
            if not essential:
                log.info("event.acked", outcome=outcome.name)
        await settlement.ack()

    async def _perform(
        self,
        message: HeldMessage,
        actions: Sequence[BrokerAction],
        reply_to: str | None = None,
    ) -> None:
        publisher = self._require_publisher()
        for action in actions:
            if isinstance(action, PublishCandidate):
                await self._publish_candidate(
                    publisher, action.candidate, mandatory=reply_to is None
                )
            elif isinstance(action, PublishFlowResult):
                await publisher.publish_flow_result(action.result)
            elif isinstance(action, PublishError):
                headers: dict[str, object] = {}
                inject_context(headers)
                await publisher.publish_error(action.error, headers=headers)
            elif isinstance(action, CopyToDeadLetters):
                await publisher.dead_letter(
                    message, code=action.code, reason=action.reason, attempts=action.attempts
                )
                log.warning(
                    "event.dead_lettered",
                    code=action.code,
                    attempts=action.attempts,
                    message_id=_log_safe(message.message_id),  # what `llm-bot dlq list` shows
                )
            elif isinstance(action, PublishJob):
                await self._publish_job(action.job)
            else:
                assert_never(action)

    async def _reply(self, reply_to: str, actions: Sequence[BrokerAction]) -> None:
        """The final candidate or error to the event's ``reply_to`` too, after the egress
        publish was confirmed (best effort: the egress copy is the record)."""
        if self._replies is None:
            return
        for action in actions:
            if isinstance(action, PublishCandidate):
                await self._replies.send(reply_to, action.candidate.event_id, action.candidate)
            elif isinstance(action, PublishError):
                await self._replies.send(reply_to, action.error.event_id, action.error)

    async def _publish_candidate(
        self, publisher: RabbitPublisher, candidate: CandidateV1, *, mandatory: bool
    ) -> None:
        routing_key = self._topology.candidate_routing_key
        with self._tracer.start_as_current_span(
            f"publish {self._topology.exchange}:{routing_key}",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "rabbitmq",
                "messaging.operation.type": "send",
                "messaging.operation.name": "publish",
                "messaging.destination.name": self._topology.exchange,
                "messaging.rabbitmq.destination.routing_key": routing_key,
                "messaging.message.id": candidate.id,
                "messaging.message.conversation_id": candidate.conversation_id,
            },
        ):
            headers: dict[str, object] = {}
            inject_context(headers)
            await publisher.publish_candidate(candidate, headers=headers, mandatory=mandatory)
        log.info("candidate.published", candidate_id=candidate.id, turn=candidate.turn)

    async def _publish_job(self, job: MemoryJobV1) -> None:
        """Memory jobs are hints (the worker reads the truth from Redis): a job that cannot
        be published is logged, not allowed to fail an event whose reply already went out."""
        publisher = self._require_publisher()
        try:
            await self._with_publish_retries(lambda: publisher.publish_memory_job(job))
        except PublishFailed as exc:
            if self._channel_closed():
                raise
            log.warning("memory_job.not_published", job_id=job.id, **log_fields(exc))

    async def _with_publish_retries(self, action: Callable[[], Awaitable[None]]) -> None:
        attempt = 1
        while True:
            try:
                await action()
            except PublishFailed:
                if self._channel_closed() or PUBLISH_RETRY.exhausted(attempt):
                    raise
                await asyncio.sleep(PUBLISH_RETRY.delay(attempt))
                attempt += 1
            else:
                return

    def _channel_closed(self) -> bool:
        return self._channel is None or self._channel.is_closed

    def _require_publisher(self) -> RabbitPublisher:
        if self._publisher is None:
            raise RuntimeError("consumer not started")
        return self._publisher


def _reply_address(message: HeldMessage) -> str | None:
    """The delivery's ``reply_to``, when it has a usable one."""
    address = message.reply_to
    if not address or undecodable(address):
        return None
    return address


def _ids_of(outcome: Outcome) -> EventIds | None:
    """The ids of the event behind an outcome, when it carries them."""
    if isinstance(outcome, DeadLetter | Refused):
        return outcome.ids
    candidate = candidate_of(outcome)
    if candidate is None:
        return None
    return EventIds(
        candidate.event_id, candidate.tenant_id, candidate.user_id, candidate.conversation_id
    )


def _log_safe(value: str | None) -> str | None:
    """A message property for a log line: None when absent or not text."""
    return value if value and not undecodable(value) else None
