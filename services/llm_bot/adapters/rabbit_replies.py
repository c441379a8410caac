"""Replies to an event's AMQP ``reply_to`` (the ``ReplyChannel`` port): streamed deltas and
the final candidate or error, for a requester waiting on that address (``llm-bot gateway``
uses RabbitMQ's direct reply-to).

Best effort by design: transient (delivery mode 1), not mandatory, on a channel without
publisher confirms, so a delta costs one frame write and never waits for the broker. A
requester that went away misses them; the candidate on the egress topic is the record. A
failure to send is logged and counted, never raised into the turn.
"""

from __future__ import annotations

import aio_pika
import structlog
from aio_pika.abc import AbstractExchange

from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1
from llm_bot.errors import log_fields
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


class RabbitReplies:
    """Publishes to ``reply_to`` addresses through the default exchange."""

    def __init__(self, *, metrics: Metrics) -> None:
        self._exchange: AbstractExchange | None = None
        self._metrics = metrics

    def bind(self, exchange: AbstractExchange) -> None:
        """Send through ``exchange`` (the consumer's default exchange, once connected)."""
        self._exchange = exchange

    async def send(
        self, reply_to: str, event_id: str, message: CandidateDeltaV1 | CandidateV1 | ErrorV1
    ) -> None:
        kind = message.schema_
        body = message.model_dump_json(by_alias=True, exclude_none=True).encode()
        if self._exchange is None:
            self._metrics.replies_sent.labels(kind, "failed").inc()
            log.warning("reply_to.not_sent", kind=kind, error="not connected")
            return
        try:
            await self._exchange.publish(
                aio_pika.Message(
                    body,
                    content_type="application/json",
                    content_encoding="utf-8",
                    delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
                    correlation_id=event_id,
                    type=kind,
                ),
                routing_key=reply_to,
                mandatory=False,
            )
        except Exception as exc:  # noqa: BLE001  # best effort: never fail the turn for it
            self._metrics.replies_sent.labels(kind, "failed").inc()
            log.warning("reply_to.not_sent", kind=kind, **log_fields(exc))
        else:
            self._metrics.replies_sent.labels(kind, "sent").inc()
