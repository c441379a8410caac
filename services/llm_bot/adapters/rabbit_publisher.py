"""Publishing to RabbitMQ with publisher confirms: candidates, errors and dead letters.

Every message is persistent JSON with ``message_id`` and ``correlation_id`` set. Candidates
and dead letters are ``mandatory``: an unroutable one is a failure, not a silent drop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aio_pika
from aio_pika.abc import AbstractExchange
from aio_pika.exceptions import AMQPError, DeliveryError, PublishError

from llm_bot.adapters.held_message import MessageLike
from llm_bot.contract import CandidateV1, ErrorV1, FlowResultV1, InternalEventV2, MemoryJobV1
from llm_bot.errors import PublishFailed

PUBLISH_TIMEOUT_SECONDS = 15.0


def _json_message(
    body: bytes, *, message_id: str, correlation_id: str, headers: Mapping[str, Any]
) -> aio_pika.Message:
    return aio_pika.Message(
        body,
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=message_id,
        correlation_id=correlation_id,
        headers=dict(headers),
    )


def copy_message(original: MessageLike, *, headers: Mapping[str, Any]) -> aio_pika.Message:
    """The original body and properties, persistent, with ``headers`` instead of its own
    (dead-lettering and DLQ replay move messages without changing them)."""
    return aio_pika.Message(
        original.body,
        headers=dict(headers),
        content_type=original.content_type,
        content_encoding=original.content_encoding,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=original.message_id,
        correlation_id=original.correlation_id,
        timestamp=original.timestamp,
        type=original.type,
        app_id=original.app_id,
    )


class RabbitPublisher:
    """Publishes the service's output on confirmed channels."""

    def __init__(
        self,
        *,
        exchange: AbstractExchange,
        dlx: AbstractExchange,
        candidate_routing_key: str,
        error_routing_key: str,
        dead_letter_routing_key: str,
        memory_routing_key: str,
        events_routing_key: str = "",
        flow_result_routing_key: str = "internal.flow.result.v1",
    ) -> None:
        self._flow_result_rk = flow_result_routing_key
        self._memory_rk = memory_routing_key
        self._events_rk = events_routing_key
        self._exchange = exchange
        self._dlx = dlx
        self._candidate_rk = candidate_routing_key
        self._error_rk = error_routing_key
        self._dead_letter_rk = dead_letter_routing_key

    async def publish_candidate(
        self, candidate: CandidateV1, *, headers: Mapping[str, Any], mandatory: bool = True
    ) -> None:
        """``mandatory`` unless the event named its own recipient (``reply_to``): then the
        egress copy is a record for whoever subscribes, and a deployment with no egress
        subscriber (clients only through the gateway) must still answer."""
        message = _json_message(
            candidate.model_dump_json(by_alias=True).encode(),
            message_id=candidate.id,
            correlation_id=candidate.conversation_id,
            headers=headers,
        )
        await self._confirmed(self._exchange, message, self._candidate_rk, mandatory=mandatory)

    async def publish_flow_result(self, result: FlowResultV1) -> None:
        """Mandatory: the service declares a queue for results (``llm-bot.flow.result.v1``)
        when flows are configured, so a result waits for its reader instead of vanishing."""
        message = _json_message(
            result.model_dump_json(by_alias=True).encode(),
            message_id=result.id,
            correlation_id=result.conversation_id,
            headers={},
        )
        await self._confirmed(self._exchange, message, self._flow_result_rk, mandatory=True)

    async def publish_memory_job(self, job: MemoryJobV1) -> None:
        message = _json_message(
            job.model_dump_json(by_alias=True).encode(),
            message_id=job.id,
            correlation_id=job.conversation_id,
            headers={},
        )
        await self._confirmed(self._exchange, message, self._memory_rk, mandatory=True)

    async def publish_event(self, event: InternalEventV2) -> None:
        """An event for the service's ingress (the worker's tool results on timeout)."""
        message = _json_message(
            event.model_dump_json(by_alias=True, exclude_none=True).encode(),
            message_id=event.id,
            correlation_id=event.conversation_id,
            headers={},
        )
        await self._confirmed(self._exchange, message, self._events_rk, mandatory=True)

    async def publish_error(self, error: ErrorV1, *, headers: Mapping[str, Any]) -> None:
        """Not mandatory: a deployment with no ErrorV1 subscriber must still dead-letter."""
        message = _json_message(
            error.model_dump_json(by_alias=True).encode(),
            message_id=f"err_{error.event_id}",
            correlation_id=error.conversation_id,
            headers=headers,
        )
        await self._confirmed(self._exchange, message, self._error_rk, mandatory=False)

    async def dead_letter(
        self, original: MessageLike, *, code: str, reason: str, attempts: int
    ) -> None:
        """Copy the original message, body and properties unchanged, to the DLX with the
        error headers."""
        headers = dict(original.headers or {})
        headers.update(
            {"x-error-code": code, "x-error-message": reason[:1024], "x-attempts": attempts}
        )
        message = copy_message(original, headers=headers)
        routing_key = original.routing_key or self._dead_letter_rk
        await self._confirmed(self._dlx, message, routing_key, mandatory=True)

    @staticmethod
    async def _confirmed(
        exchange: AbstractExchange,
        message: aio_pika.Message,
        routing_key: str,
        *,
        mandatory: bool,
    ) -> None:
        try:
            await exchange.publish(
                message, routing_key, mandatory=mandatory, timeout=PUBLISH_TIMEOUT_SECONDS
            )
        except DeliveryError as exc:
            raise PublishFailed(
                f"publish to {routing_key!r} was returned (unroutable) or nacked"
            ) from exc
        except (TimeoutError, PublishError, AMQPError, ConnectionError) as exc:
            raise PublishFailed(
                f"publish to {routing_key!r} not confirmed: {type(exc).__name__}"
            ) from exc
