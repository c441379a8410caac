"""The ingress consumer: deliveries → handler → broker actions.

Manual acks; up to ``LLM_BOT_PREFETCH`` deliveries in flight, each processed in its own
task. An event is acked only after its outcome's publishes are confirmed (and, for a
reply, after memory was committed by the graph). If acting on an outcome fails, the
delivery is rejected without requeue, so the broker dead-letters it: nothing is lost and
nothing loops.
"""

from __future__ import annotations

import asyncio
import contextlib

import aio_pika
import structlog
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from llm_bot.adapters.rabbit_publisher import RabbitPublisher, trace_headers
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.service.handler import Delivery, EventHandler
from llm_bot.service.outcomes import DeadLetter, Duplicate, Outcome, Replied

log = structlog.get_logger(__name__)


class EventConsumer:
    """Consumes the ingress queue until stopped."""

    def __init__(
        self,
        *,
        amqp_url: str,
        topology: Topology,
        handler: EventHandler,
        prefetch: int,
    ) -> None:
        self._amqp_url = amqp_url
        self._topology = topology
        self._handler = handler
        self._prefetch = prefetch
        self._connection: AbstractRobustConnection | None = None
        self._queue: AbstractQueue | None = None
        self._consumer_tag: str | None = None
        self._publisher: RabbitPublisher | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        """Connect (robustly: reconnects and re-declares by itself), declare, consume."""
        self._connection = await aio_pika.connect_robust(
            self._amqp_url, client_properties={"connection_name": "llm-bot consumer"}
        )
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.set_qos(prefetch_count=self._prefetch)
        declared = await declare_topology(channel, self._topology)
        self._publisher = RabbitPublisher(
            exchange=declared.exchange,
            dlx=declared.dlx,
            candidate_routing_key=self._topology.candidate_routing_key,
            error_routing_key=self._topology.error_routing_key,
            dead_letter_routing_key=self._topology.ingress_routing_key,
        )
        self._queue = declared.ingress
        self._consumer_tag = await self._queue.consume(self._on_message, no_ack=False)
        log.info("consumer.started", queue=self._topology.ingress_queue, prefetch=self._prefetch)

    async def stop(self, *, grace_seconds: float) -> None:
        """Stop taking deliveries, let in-flight work finish within the grace period,
        requeue the rest, close the connection."""
        if self._queue is not None and self._consumer_tag is not None:
            with contextlib.suppress(Exception):
                await self._queue.cancel(self._consumer_tag)
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                log.warning("consumer.requeued_on_shutdown", count=len(pending))
        if self._connection is not None:
            await self._connection.close()
        log.info("consumer.stopped")

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.create_task(self._process(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, message: AbstractIncomingMessage) -> None:
        structlog.contextvars.clear_contextvars()
        try:
            delivery = Delivery(
                body=message.body,
                headers=dict(message.headers or {}),
                redelivered=bool(message.redelivered),
            )
            outcome = await self._handler.handle(delivery)
            await self._act(message, outcome)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await message.nack(requeue=True)
            raise
        except Exception:
            log.exception("delivery.action_failed")
            with contextlib.suppress(Exception):
                await message.reject(requeue=False)

    async def _act(self, message: AbstractIncomingMessage, outcome: Outcome) -> None:
        publisher = self._publisher
        assert publisher is not None  # noqa: S101  # set in start() before consuming
        headers = trace_headers(message.headers or {})
        if isinstance(outcome, Replied | Duplicate) and outcome.candidate is not None:
            await publisher.publish_candidate(outcome.candidate, headers=headers)
            log.info(
                "candidate.published",
                candidate_id=outcome.candidate.id,
                turn=outcome.candidate.turn,
                outcome=outcome.name,
            )
        elif isinstance(outcome, DeadLetter):
            error = outcome.error_event()
            if error is not None:
                await publisher.publish_error(error, headers=headers)
            await publisher.dead_letter(
                message, code=outcome.code, reason=outcome.message, attempts=outcome.attempts
            )
            log.warning("event.dead_lettered", code=outcome.code, attempts=outcome.attempts)
        else:
            log.info("event.acked", outcome=outcome.name)
        await message.ack()
