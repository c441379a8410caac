"""Moving a tenant's deliveries past its bound to its overflow queue (issue 42;
``adapters/rabbit_overflow.py`` says what the overflow queues are).

Admission hands over each batch it could not admit; one loop moves the batches in order:
the copies of a batch are published in order on one channel and their confirms awaited
together, apart from admission, so a quiet tenant's delivery behind a flood is admitted
while the flood's copies are confirmed. A delivery is acked only once its copy is
confirmed.
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
MOVE_BATCH = 1024
"""Batches waiting are moved together up to this many: their confirms are awaited once
(small admission batches, each waiting for its own confirms, moved ~300 a second)."""
RETRY_SECONDS = 1.0
"""Pause before copies the broker did not confirm are published again."""


class OverflowMoves:
    """The batches waiting to be moved, and the loop that moves them."""

    def __init__(self, move: MoveToOverflow, metrics: Metrics) -> None:
        self._move_copies = move
        self._metrics = metrics
        self._batches: asyncio.Queue[list[Offered]] = asyncio.Queue()

    def add(self, batch: list[Offered]) -> None:
        self._batches.put_nowait(batch)

    def drain(self) -> list[Offered]:
        """Shutdown: what was not moved yet (unacked: to be given back)."""
        left: list[Offered] = []
        while not self._batches.empty():
            left.extend(self._batches.get_nowait())
        return left

    async def run(self) -> None:
        while True:
            batch = await self._batches.get()
            while len(batch) < MOVE_BATCH and not self._batches.empty():
                batch += self._batches.get_nowait()  # one confirm wait for all waiting
            try:
                await self._move(batch)
            except asyncio.CancelledError:
                for offered in batch:  # unacked: the broker has them back
                    with contextlib.suppress(Exception):
                        await offered.message.nack(requeue=True)
                raise

    async def _move(self, batch: list[Offered]) -> None:
        """Copy a batch to the overflow and ack each delivery whose copy the broker
        confirmed. Those it did not confirm (an overflow queue at a policy's bound, a
        broker fault) stay unacked and are tried again before any later batch: their ids
        stay noted in Redis, so their conversations' later deliveries go behind them, and
        while they wait the window fills and RabbitMQ stops delivering (the push back).
        One whose channel closed is the broker's again: redelivered, moved again."""
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
            if not refused:
                return
            self._metrics.fair_overflowed.labels("refused").inc(len(refused))
            log.warning("fair.overflow_refused", count=len(refused))
            batch = refused
            await asyncio.sleep(RETRY_SECONDS)
