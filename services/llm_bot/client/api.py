"""``Client``: publish InternalEventV2 events to llm-bot with publisher confirms and read
their replies (the CandidateV1, its streamed CandidateDeltaV1 pieces, or the ErrorV1).

One robust connection (``connection.py``: the service's own reconnection, node after node)
and one confirmed channel that publishes the events and consumes their replies on
RabbitMQ's direct reply-to (``amq.rabbitmq.reply-to``), as ``llm-bot gateway`` does: no
queue to declare or clean up, and the service streams the reply's pieces there. Replies
are matched to their event by candidate id (the event id scoped by tenant and user). When
the connection is lost while a reply is awaited, its address went with it: once the
connection is back the client publishes the same event again (same id), which the service
answers as a duplicate with the stored reply, so no turn is lost or answered twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import aio_pika
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage, AbstractRobustConnection
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError, DeliveryError
from pamqp.commands import Basic
from pydantic import ValidationError

from llm_bot.client import events
from llm_bot.client.connection import connect_rotating
from llm_bot.client.errors import (
    BrokerUnavailable,
    EventFailed,
    NotDelivered,
    ReplyTimeout,
    StreamDiverged,
)
from llm_bot.contract import (
    CandidateDeltaV1,
    CandidateToolCall,
    CandidateV1,
    ErrorV1,
    InternalEventV2,
    ToolDefinition,
    TranscriptMessage,
)
from llm_bot.contract.messages import candidate_id
from llm_bot.contract.stream_text import StreamText
from llm_bot.contract.validation import validate_event

DEFAULT_AMQP_URL = "amqp://guest:guest@localhost:5672/"
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"
CONNECT_TIMEOUT_SECONDS = 15.0
RECONNECT_INTERVAL_SECONDS = 1.0
PUBLISH_TIMEOUT_SECONDS = 15.0

Reply = CandidateDeltaV1 | CandidateV1 | ErrorV1
_REPLY_MODELS: dict[str, type[Reply]] = {
    "candidate.delta.v1": CandidateDeltaV1,
    "candidate.v1": CandidateV1,
    "llmbot.error.v1": ErrorV1,
}
_LOST = object()
"""Put in a waiting request's inbox when the connection (and its reply address) is lost."""


class Client:
    """An llm-bot client on one RabbitMQ connection; ``async with Client() as bot``.

    ``exchange`` and ``routing_key``: the service's ``LLM_BOT_INGRESS_EXCHANGE`` and
    ``LLM_BOT_INGRESS_ROUTING_KEY``; ``timeout``: how long ``ask`` and ``stream`` wait for
    a reply (seconds), unless a call says otherwise.
    """

    def __init__(
        self,
        amqp_url: str = DEFAULT_AMQP_URL,
        *,
        exchange: str = "internal",
        routing_key: str = "internal.llmbot.v1",
        timeout: float = 120.0,
    ) -> None:
        self._amqp_url = amqp_url
        self._exchange_name = exchange
        self._routing_key = routing_key
        self._timeout = timeout
        self._connection: AbstractRobustConnection | None = None
        self._exchange: AbstractExchange | None = None
        self._inboxes: dict[str, list[asyncio.Queue[Reply | object]]] = {}
        self._answered: dict[str, set[str]] = {}

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect (``BrokerUnavailable`` when no node answers) and start listening."""
        try:
            connection = await connect_rotating(
                self._amqp_url,
                attempt_timeout=CONNECT_TIMEOUT_SECONDS,
                client_properties={"connection_name": "llm-bot client"},
                reconnect_interval=RECONNECT_INTERVAL_SECONDS,
            )
        except (AMQPError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"RabbitMQ is not reachable: {exc}") from exc
        self._connection = connection
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        self._exchange = await channel.declare_exchange(
            self._exchange_name, aio_pika.ExchangeType.TOPIC, durable=True
        )
        replies = await channel.declare_queue(DIRECT_REPLY_TO, passive=True)
        await replies.consume(self._on_reply, no_ack=True)
        connection.reconnect_callbacks.add(self._on_reconnect)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def publish(self, event: InternalEventV2 | Mapping[str, Any]) -> InternalEventV2:
        """Publish ``event`` and wait for the broker's confirm (reconnecting meanwhile if the
        connection is lost); returns the event as validated. ``EventInvalid`` when the
        service would refuse it, ``NotDelivered`` when the broker refused or could not
        route it (is llm-bot running?), ``BrokerUnavailable`` when it stays unreachable."""
        checked = event if isinstance(event, InternalEventV2) else validate_event(event)
        await self._publish(checked, reply_to=None, within=PUBLISH_TIMEOUT_SECONDS)
        return checked

    async def ask(
        self,
        text: str,
        *,
        tenant: str,
        user: str,
        conversation: str,
        tools: Sequence[ToolDefinition | Mapping[str, Any]] | None = None,
        metadata: Mapping[str, Any] | None = None,
        event_id: str | None = None,
        within: float | None = None,
    ) -> CandidateV1:
        """Send ``text`` as the user's message and return its CandidateV1 (``kind``
        ``tool_call`` when the model asks for tools: answer them with ``answer_tool``).
        ``EventFailed`` with the ErrorV1 when the service gave up on it, ``ReplyTimeout``
        when no reply came within ``within`` seconds (default: the client's ``timeout``)."""
        where = events.Conversation(tenant, user, conversation)
        event = events.message(text, where, event_id=event_id, tools=tools, metadata=metadata)
        async with self._request(event, within) as replies:
            async for reply in replies:
                if isinstance(reply, CandidateV1):
                    return reply
        raise AssertionError("unreachable: _request ends with a reply or an error")

    async def stream(
        self,
        text: str,
        *,
        tenant: str,
        user: str,
        conversation: str,
        metadata: Mapping[str, Any] | None = None,
        event_id: str | None = None,
        within: float | None = None,
    ) -> AsyncIterator[str]:
        """Send ``text`` and yield the reply's text piece by piece as the service streams
        it; the pieces joined are the candidate's text. A retried model call that says
        something else than what was yielded ends the stream with ``StreamDiverged``
        (carrying the final candidate); errors as ``ask``."""
        where = events.Conversation(tenant, user, conversation)
        event = events.message(text, where, event_id=event_id, metadata=metadata)
        shown = StreamText()
        async with self._request(event, within) as replies:
            async for reply in replies:
                if isinstance(reply, CandidateDeltaV1):
                    piece = shown.delta(reply.seq, reply.delta)
                    if piece:
                        yield piece
                elif isinstance(reply, CandidateV1):
                    rest = shown.final(reply.text)
                    if rest is None:
                        raise StreamDiverged(reply)
                    if rest:
                        yield rest
                    return

    async def answer_tool(
        self,
        call: CandidateToolCall,
        result: object,
        *,
        of: CandidateV1,
        within: float | None = None,
    ) -> CandidateV1 | None:
        """Publish ``result`` (a string, else sent as JSON) as the ``tool.result`` of
        ``call``, one of candidate ``of``'s calls. When it is the last of ``of``'s calls
        this client answers, the model is called again: returns that next candidate (text,
        or another round of calls); else None once the broker confirmed it."""
        where = events.Conversation(of.tenant_id, of.user_id, of.conversation_id)
        event = events.tool_result(call, result, where)
        answered = self._answered.setdefault(of.id, set())
        answered.add(call.id)
        if not {c.id for c in of.tool_calls or ()} <= answered:
            await self._publish(event, reply_to=None, within=PUBLISH_TIMEOUT_SECONDS)
            return None
        self._answered.pop(of.id, None)
        async with self._request(event, within) as replies:
            async for reply in replies:
                if isinstance(reply, CandidateV1):
                    return reply
        raise AssertionError("unreachable: _request ends with a reply or an error")

    async def import_transcript(
        self,
        messages: Sequence[TranscriptMessage | Mapping[str, Any]],
        *,
        tenant: str,
        user: str,
        conversation: str,
        event_id: str | None = None,
    ) -> list[str]:
        """Import messages that already happened (``{"role", "text", "name"?,
        "created_at"?}``), 500 per event, in order; returns the event ids. No reply."""
        where = events.Conversation(tenant, user, conversation)
        imported = events.transcripts(messages, where, event_id=event_id)
        for event in imported:
            await self._publish(event, reply_to=None, within=PUBLISH_TIMEOUT_SECONDS)
        return [event.id for event in imported]

    async def forget(self, *, tenant: str, user: str, conversation: str = "*") -> str:
        """Erase the user's memory in the tenant (one conversation, or ``*``: all);
        returns the event id. No reply."""
        event = events.forget(tenant, user, conversation)
        await self._publish(event, reply_to=None, within=PUBLISH_TIMEOUT_SECONDS)
        return event.id

    @contextlib.asynccontextmanager
    async def _request(
        self, event: InternalEventV2, within: float | None
    ) -> AsyncIterator[AsyncIterator[Reply]]:
        """Publish ``event`` with this connection's reply address and yield its replies up
        to the candidate (an ErrorV1 raises ``EventFailed``)."""
        key = candidate_id(event.tenant_id, event.user_id, event.id)
        inbox: asyncio.Queue[Reply | object] = asyncio.Queue()
        self._inboxes.setdefault(key, []).append(inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._timeout if within is None else within)

        async def replies() -> AsyncIterator[Reply]:
            await self._publish(event, reply_to=DIRECT_REPLY_TO, within=deadline - loop.time())
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await inbox.get()
                except TimeoutError:
                    raise ReplyTimeout(
                        f"no reply to {event.id} within the timeout: is llm-bot running?"
                    ) from None
                if item is _LOST:  # the reply address died: ask again, the service dedupes
                    await self._publish(
                        event, reply_to=DIRECT_REPLY_TO, within=deadline - loop.time()
                    )
                    continue
                if isinstance(item, ErrorV1):
                    raise EventFailed(item)
                assert isinstance(item, CandidateDeltaV1 | CandidateV1)  # noqa: S101
                yield item
                if isinstance(item, CandidateV1):
                    return

        try:
            yield replies()
        finally:
            waiting = self._inboxes.get(key, [])
            with contextlib.suppress(ValueError):
                waiting.remove(inbox)
            if not waiting:
                self._inboxes.pop(key, None)

    async def _publish(
        self, event: InternalEventV2, *, reply_to: str | None, within: float
    ) -> None:
        """Publish until the broker confirms; while the connection is down, wait for it
        (within ``within`` seconds) and publish again."""
        if self._connection is None or self._exchange is None:
            raise BrokerUnavailable("not connected: use `async with Client(...)` or connect()")
        message = aio_pika.Message(
            event.model_dump_json(by_alias=True, exclude_none=True).encode(),
            content_type="application/json",
            content_encoding="utf-8",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=event.id,
            correlation_id=event.conversation_id,
            reply_to=reply_to,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(within, 0.0)
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    await self._connection.connected.wait()
                    await self._exchange.publish(message, self._routing_key, mandatory=True)
            except DeliveryError as exc:
                raise NotDelivered(_refusal(exc, self._routing_key)) from exc
            except TimeoutError as exc:
                raise BrokerUnavailable(
                    f"the broker did not confirm {event.id} in time (connection down?)"
                ) from exc
            except (AMQPError, ChannelInvalidStateError, ConnectionError, RuntimeError):
                await asyncio.sleep(RECONNECT_INTERVAL_SECONDS / 4)  # reconnecting: again
            else:
                return

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
        for inbox in self._inboxes.get(key, ()):
            inbox.put_nowait(reply)

    def _on_reconnect(self, *_: object) -> None:
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox.put_nowait(_LOST)


def _refusal(exc: DeliveryError, routing_key: str) -> str:
    if isinstance(exc.frame, Basic.Nack):
        return "the broker refused the event (the ingress queue is full)"
    return f"no queue takes {routing_key!r}: is llm-bot running (make run, or make dev)?"


def _parse_reply(message: AbstractIncomingMessage) -> Reply | None:
    """The reply, validated by the model its AMQP ``type`` names; None when unreadable."""
    model = _REPLY_MODELS.get(str(message.type))
    if model is None:
        return None
    try:
        return model.model_validate_json(message.body)
    except ValidationError:
        return None
