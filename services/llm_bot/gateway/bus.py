"""The gateway's side of the bus: publish each request as an InternalEventV2 and receive its
reply over RabbitMQ's direct reply-to.

Direct reply-to (``amq.rabbitmq.reply-to``) rather than a per-gateway exclusive queue: no
queue to declare, bind, clean up or lose on a restart, no broker state per gateway replica,
and replies go straight to this connection's channel (no queue write), which is what time
to first token wants. Its limits fit the job: replies are not persisted (deltas are best
effort by contract and the candidate's record is on the egress topic), and a reply whose
requester is gone is dropped. The requests are published on the same confirmed channel
that consumes the replies, as direct reply-to requires.

Replies carry the event id as ``correlation_id``; a waiter is keyed by the candidate id
(event id scoped by tenant and user), so two tenants using the same idempotency key at once
never see each other's replies. A reconnect fails every waiting request at once (its reply
address died with the old channel) instead of letting it run into its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import (
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aiormq.exceptions import DeliveryError
from pamqp.commands import Basic
from pydantic import ValidationError

from llm_bot.adapters import amqp_text
from llm_bot.adapters.rabbit_connection import connect_amqp_robust
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1, InternalEventV2
from llm_bot.contract.messages import candidate_id

log = structlog.get_logger(__name__)

DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"
RECONNECT_INTERVAL_SECONDS = 1.0
PUBLISH_TIMEOUT_SECONDS = 10.0

Reply = CandidateDeltaV1 | CandidateV1 | ErrorV1


class BusUnavailable(Exception):
    """The broker cannot take the request, or the connection carrying its reply was lost."""


class BusOverloaded(BusUnavailable):
    """The broker refused the request (a nack): the ingress queue is at the length or
    size its policy bounds it to (``overflow: reject-publish``)."""


class ReplyWait:
    """The replies of one published request, in arrival order."""

    def __init__(self) -> None:
        self._inbox: asyncio.Queue[Reply | BusUnavailable] = asyncio.Queue()

    def put(self, item: Reply | BusUnavailable) -> None:
        self._inbox.put_nowait(item)

    async def next(self) -> Reply:
        """The next reply; ``BusUnavailable`` when the connection was lost."""
        item = await self._inbox.get()
        if isinstance(item, BusUnavailable):
            raise item
        return item


class GatewayBus:
    """One robust connection: a confirmed channel publishing events and consuming replies."""

    def __init__(self, *, amqp_url: str, topology: Topology) -> None:
        self._amqp_url = amqp_url
        self._topology = topology
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._exchange: AbstractExchange | None = None
        self._waits: dict[str, list[ReplyWait]] = {}

    async def start(self) -> None:
        amqp_text.install()
        self._connection = await connect_amqp_robust(
            self._amqp_url,
            client_properties={"connection_name": "llm-bot gateway"},
            reconnect_interval=RECONNECT_INTERVAL_SECONDS,
        )
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        self._channel = channel
        declared = await declare_topology(channel, self._topology)
        self._exchange = declared.exchange
        replies = await channel.declare_queue(DIRECT_REPLY_TO, passive=True)
        await replies.consume(self._on_reply, no_ack=True)
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        log.info("gateway.bus_ready", exchange=self._topology.exchange)

    async def close(self) -> None:
        self._fail_all("the gateway is shutting down")
        if self._connection is not None:
            await self._connection.close()

    def readiness(self) -> str | None:
        if self._connection is None or self._channel is None:
            return "not connected"
        if not self._connection.connected.is_set():
            return "broker connection down (reconnecting)"
        if self._channel.is_closed:
            return "broker channel closed (reopening)"
        return None

    @property
    def waiting(self) -> int:
        return sum(len(waits) for waits in self._waits.values())

    @asynccontextmanager
    async def request(
        self, event: InternalEventV2, headers: Mapping[str, Any]
    ) -> AsyncIterator[ReplyWait]:
        """Publish ``event`` (confirmed) with this gateway's reply address and yield the
        wait for its replies; leaving the block stops listening (a reply still on its way
        is dropped here, never handed to another request)."""
        key = candidate_id(event.tenant_id, event.user_id, event.id)
        wait = ReplyWait()
        self._waits.setdefault(key, []).append(wait)
        try:
            await self._publish(event, headers)
            yield wait
        finally:
            waits = self._waits.get(key, [])
            with contextlib.suppress(ValueError):
                waits.remove(wait)
            if not waits:
                self._waits.pop(key, None)

    async def _publish(self, event: InternalEventV2, headers: Mapping[str, Any]) -> None:
        if self._exchange is None or self.readiness() is not None:
            raise BusUnavailable(self.readiness() or "not connected")
        message = aio_pika.Message(
            event.model_dump_json(by_alias=True, exclude_none=True).encode(),
            content_type="application/json",
            content_encoding="utf-8",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=event.id,
            correlation_id=event.conversation_id,
            reply_to=DIRECT_REPLY_TO,
            headers=dict(headers),
        )
        try:
            await self._exchange.publish(
                message,
                routing_key=self._topology.ingress_routing_key,
                mandatory=True,
                timeout=PUBLISH_TIMEOUT_SECONDS,
            )
        except DeliveryError as exc:
            if isinstance(exc.frame, Basic.Nack):  # the ingress queue is at its bound
                raise BusOverloaded("the ingress queue is full (the broker refused it)") from exc
            raise BusUnavailable(f"the broker did not take the request: {exc}") from exc
        except Exception as exc:
            raise BusUnavailable(f"the broker did not take the request: {exc}") from exc

    async def _on_reply(self, message: AbstractIncomingMessage) -> None:
        reply = _parse_reply(message)
        if reply is None:
            return
        if isinstance(reply, CandidateDeltaV1):
            key = reply.candidate_id
        elif isinstance(reply, CandidateV1):
            key = reply.id
        else:
            key = candidate_id(reply.tenant_id, reply.user_id, reply.event_id)
        for wait in self._waits.get(key, ()):
            wait.put(reply)

    def _on_reconnect(self, *_: object) -> None:
        self._fail_all("the broker connection was lost; the reply address went with it")

    def _fail_all(self, why: str) -> None:
        for waits in self._waits.values():
            for wait in waits:
                wait.put(BusUnavailable(why))


_REPLY_MODELS: dict[str, type[Reply]] = {
    "candidate.delta.v1": CandidateDeltaV1,
    "candidate.v1": CandidateV1,
    "llmbot.error.v1": ErrorV1,
}


def _parse_reply(message: AbstractIncomingMessage) -> Reply | None:
    """The reply, validated by the model its AMQP ``type`` names (the body's ``schema``)."""
    model = _REPLY_MODELS.get(str(message.type))
    if model is not None:
        try:
            return model.model_validate_json(message.body)
        except ValidationError:
            pass
    log.warning("gateway.reply_unreadable", type=message.type)
    return None
