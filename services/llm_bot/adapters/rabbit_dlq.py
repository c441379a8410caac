"""The dead-letter queue: list it without consuming, replay it to the ingress (SPEC 4).

Both take messages with ``basic.get`` on their own channel and hold every message they do
not remove (unacked) until the end, so one run never sees a message twice. Giving them back
keeps the queue order only if every message is held and they are nacked in order in small
chunks: a RabbitMQ 3.10 quorum queue puts a nacked message at the back, returns a closed
channel's messages in no particular order, and reorders one batch of more than 32 returns.
So the rest of the DLQ (up to ``MAX_HELD``) is held too before giving back. Replay
republishes to the ingress on a confirmed channel with ``mandatory`` set and acks a message
from the DLQ only after the broker confirmed its copy.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
)
from aio_pika.exceptions import AMQPError, ChannelNotFoundEntity, DeliveryError, PublishError

from llm_bot.adapters import dead_letter_headers as dl
from llm_bot.adapters.rabbit_publisher import copy_message
from llm_bot.adapters.rabbit_topology import Topology

PUBLISH_TIMEOUT_SECONDS = 15.0
GET_TIMEOUT_SECONDS = 10.0
RETURN_CHUNK = 16  # nacks in flight at once (a quorum queue reorders batches over 32)
MAX_HELD = 100_000  # beyond this, the order of the rest of the DLQ is not preserved
RETURN_POLL_SECONDS, RETURN_POLLS = 0.005, 400


class DlqError(Exception):
    """A DLQ command could not run or finish; ``str()`` is one line for the operator."""


class DlqNotFound(DlqError):
    """The DLQ or the ingress exchange does not exist (wrong names, or never declared)."""


class ReplayFailed(DlqError):
    """A republish was returned, nacked or not confirmed; the message stays in the DLQ."""

    def __init__(self, message: str, *, replayed: int) -> None:
        super().__init__(f"{message} (replayed {replayed} before stopping)")
        self.replayed = replayed


@dataclass(frozen=True)
class DeadLetter:
    """What an operator may see of one dead-lettered message (never its body text)."""

    position: int
    message_id: str | None
    correlation_id: str | None
    code: str
    error_message: str | None
    attempts: int | None
    body_size: int
    first_death: datetime | None
    tenant_id: str | None
    event_id: str | None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["first_death"] = self.first_death.isoformat() if self.first_death else None
        return data


@dataclass(frozen=True)
class ReplayResult:
    """Counts of one replay run over the messages that were in the DLQ when it started."""

    replayed: int
    skipped: int
    depth_before: int

    @property
    def left(self) -> int:  # messages of the starting DLQ still there
        return max(self.depth_before - self.replayed, 0)


def describe(message: AbstractIncomingMessage, position: int) -> DeadLetter:
    headers = message.headers or {}
    tenant_id, event_id = dl.body_ids(message.body)
    return DeadLetter(
        position=position,
        message_id=message.message_id,
        correlation_id=message.correlation_id,
        code=dl.error_code(headers),
        error_message=dl.error_message(headers),
        attempts=dl.attempts(headers),
        body_size=len(message.body),
        first_death=dl.first_death(headers),
        tenant_id=tenant_id,
        event_id=event_id,
    )


def replay_message(original: AbstractIncomingMessage, *, now: datetime) -> aio_pika.Message:
    """The original body and properties, persistent, with :func:`dl.replay_headers`."""
    return copy_message(original, headers=dl.replay_headers(original.headers or {}, now=now))


class _Borrowed:
    """Messages taken from one queue with ``basic.get`` and not acked, in taking order."""

    def __init__(self, channel: AbstractChannel, queue_name: str) -> None:
        self._channel = channel
        self._queue_name = queue_name
        self._tags: list[int] = []

    async def take(self, queue: AbstractQueue) -> AbstractIncomingMessage | None:
        message = await queue.get(no_ack=False, fail=False, timeout=GET_TIMEOUT_SECONDS)
        if message is not None and message.delivery_tag is not None:
            self._tags.append(message.delivery_tag)
        return message

    async def ack(self, message: AbstractIncomingMessage) -> None:
        await message.ack()
        if message.delivery_tag in self._tags:
            self._tags.remove(message.delivery_tag)

    async def give_back(self) -> None:
        """Hold the rest of the queue, nack everything held in order, close the channel.
        Best effort: if the channel broke, closing it still returns them, perhaps reordered."""
        with contextlib.suppress(AMQPError, ConnectionError, TimeoutError, RuntimeError):
            if self._tags:
                queue = await self._channel.declare_queue(self._queue_name, passive=True)
                while len(self._tags) < MAX_HELD and await self.take(queue) is not None:
                    pass  # held messages go back behind the others: hold them all
                await self._nack_in_chunks()
        await _close(self._channel)

    async def _nack_in_chunks(self) -> None:
        underlay = await self._channel.get_underlay_channel()
        base = await self._ready()
        for start in range(0, len(self._tags), RETURN_CHUNK):
            chunk = self._tags[start : start + RETURN_CHUNK]
            for tag in chunk:
                await underlay.basic_nack(tag, requeue=True)
            for _ in range(RETURN_POLLS):  # until the chunk is back; gives up if someone consumes
                if await self._ready() >= base + start + len(chunk):
                    break
                await asyncio.sleep(RETURN_POLL_SECONDS)
        self._tags.clear()

    async def _ready(self) -> int:
        """Fresh each time (a robust channel caches passive declarations)."""
        underlay = await self._channel.get_underlay_channel()
        declared = await underlay.queue_declare(self._queue_name, passive=True)
        return int(declared.message_count or 0)


class RabbitDlq:
    """List and replay the DLQ of one topology over an open connection."""

    def __init__(self, *, connection: AbstractConnection, topology: Topology) -> None:
        self._connection = connection
        self._topology = topology

    async def depth(self) -> int:
        """Ready messages in the DLQ."""
        channel = await self._connection.channel(publisher_confirms=False)
        try:
            return _ready(await self._queue(channel))
        finally:
            await _close(channel)

    async def list_dead_letters(self, limit: int) -> list[DeadLetter]:
        """Up to ``limit`` messages from the head of the DLQ, all left in place, in order."""
        channel = await self._connection.channel(publisher_confirms=False)
        borrowed = _Borrowed(channel, self._topology.dlq)
        try:
            queue = await self._queue(channel)
            letters: list[DeadLetter] = []
            while len(letters) < limit and (message := await borrowed.take(queue)) is not None:
                letters.append(describe(message, len(letters) + 1))
            return letters
        finally:
            await borrowed.give_back()

    async def replay(self, limit: int | None = None, code: str | None = None) -> ReplayResult:
        """Move up to ``limit`` messages (with error code ``code``, if given) to the ingress;
        scan at most the starting depth, so an event dead-lettered anew is not seen twice."""
        channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        borrowed = _Borrowed(channel, self._topology.dlq)
        try:
            queue = await self._queue(channel)
            depth = _ready(queue)
            exchange = await self._ingress_exchange(channel)
            replayed = skipped = 0
            while replayed + skipped < depth and (limit is None or replayed < limit):
                message = await borrowed.take(queue)
                if message is None:
                    break
                if code is not None and dl.error_code(message.headers or {}) != code:
                    skipped += 1  # stays held (unacked) until the end of the run
                    continue
                await self._republish(exchange, message, replayed=replayed)
                await borrowed.ack(message)
                replayed += 1
            return ReplayResult(replayed, skipped, depth_before=depth)
        finally:
            await borrowed.give_back()

    async def _republish(
        self, exchange: AbstractExchange, message: AbstractIncomingMessage, *, replayed: int
    ) -> None:
        routing_key = self._topology.ingress_routing_key
        try:
            await exchange.publish(
                replay_message(message, now=datetime.now(UTC)),
                routing_key,
                mandatory=True,
                timeout=PUBLISH_TIMEOUT_SECONDS,
            )
        except (TimeoutError, AMQPError, ConnectionError) as exc:
            if isinstance(exc, PublishError):
                why = "was returned: no queue is bound (is the ingress queue declared?)"
            elif isinstance(exc, DeliveryError):
                why = "was nacked by the broker"
            else:
                why = f"was not confirmed ({type(exc).__name__})"
            raise ReplayFailed(
                f"replay to {routing_key!r} on exchange {exchange.name!r} {why}", replayed=replayed
            ) from exc

    async def _queue(self, channel: AbstractChannel) -> AbstractQueue:
        try:
            return await channel.declare_queue(self._topology.dlq, passive=True)
        except ChannelNotFoundEntity as exc:
            raise DlqNotFound(
                f"dead-letter queue {self._topology.dlq!r} does not exist "
                "(check LLM_BOT_DLQ or LLM_BOT_MEMORY_DLQ)"
            ) from exc

    async def _ingress_exchange(self, channel: AbstractChannel) -> AbstractExchange:
        try:
            return await channel.get_exchange(self._topology.exchange, ensure=True)
        except ChannelNotFoundEntity as exc:
            raise DlqNotFound(
                f"ingress exchange {self._topology.exchange!r} does not exist "
                "(check LLM_BOT_INGRESS_EXCHANGE)"
            ) from exc


def _ready(queue: AbstractQueue) -> int:
    return int(queue.declaration_result.message_count or 0)


async def _close(channel: AbstractChannel) -> None:
    """Close the channel; one the broker already closed (a failed passive declare) is fine."""
    with contextlib.suppress(AMQPError, ConnectionError, RuntimeError):
        await channel.close()
