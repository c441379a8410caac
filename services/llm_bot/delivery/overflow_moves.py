"""Moving a tenant's deliveries past its bound to its overflow queue (issue 42;
``adapters/rabbit_overflow.py`` says what the overflow queues are).

Admission moves each batch's deliveries it could not admit before it admits the next: the
copies of a batch are published in order on one channel and their confirms awaited
together, and meanwhile the replica takes no new work (admission first), so the flood
ahead of a quiet tenant's events is read and moved sooner. Measured against a loop of its
own (admission going on while copies are confirmed): docs/benchmarks-notebook.md. A
delivery is acked only once its copy is confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import structlog

from llm_bot.delivery.unanswered import Offered, channel_closed
from llm_bot.errors import log_fields
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

MoveToOverflow = Callable[[Sequence[Offered]], Awaitable[list[bool]]]
"""Copy deliveries to their tenants' overflow queues, in order: True for each the broker
confirmed (its original is then acked here), False for each it did not."""
RETRY_SECONDS = 1.0
"""Pause before copies the broker did not confirm are published again."""


class OverflowMoves:
    """Moves batches of deliveries to their tenants' overflow queues."""

    def __init__(self, move: MoveToOverflow, metrics: Metrics) -> None:
        self._move_copies = move
        self._metrics = metrics
        self._retrying = False

    @property
    def retrying(self) -> bool:
        """Whether copies the broker refused are waiting to be published again."""
        return self._retrying

    async def move(self, batch: list[Offered]) -> None:
        """Copy a batch to the overflow and ack each delivery whose copy the broker
        confirmed. Those it did not confirm (an overflow queue at a policy's bound, a
        broker fault) stay unacked and are tried again until it does, before anything
        else is admitted: their ids stay noted in Redis, so their conversations' later
        deliveries go behind them, and meanwhile the window fills and RabbitMQ stops
        delivering (the push back). One whose channel closed is the broker's again:
        redelivered, moved again."""
        while True:
            try:
                confirmed = await self._move_copies(batch)
            except Exception as exc:  # noqa: BLE001  # tried again: not lost
                log.warning("fair.overflow_refused", **log_fields(exc), count=len(batch))
                confirmed = [False] * len(batch)
            refused: list[Offered] = []
            for offered, ok in zip(batch, confirmed, strict=True):
                if ok:
                    with contextlib.suppress(Exception):  # closed: redelivered, moved again
                        await offered.message.ack()
                elif not channel_closed(offered.message):
                    refused.append(offered)
            self._metrics.fair_overflowed.labels("moved").inc(sum(confirmed))
            self._retrying = bool(refused)
            if not refused:
                return
            self._metrics.fair_overflowed.labels("refused").inc(len(refused))
            log.warning("fair.overflow_refused", count=len(refused))
            batch = refused
            await asyncio.sleep(RETRY_SECONDS)
