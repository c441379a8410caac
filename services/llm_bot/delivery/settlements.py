"""How a processed delivery is let go: acked to RabbitMQ, or completed in the fair queue.

The consumer acts on an outcome the same way whichever way the delivery came; only the
last step differs, and it is one of three:
- ``ack``: the outcome's publishes are confirmed; the delivery is done.
- ``requeue``: processing was cut short (shutdown, the channel died); the delivery is
  taken again later, where it was in its conversation.
- ``reject``: acting on the outcome failed on a live channel; the delivery goes to the
  dead letters as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
from aio_pika.abc import AbstractIncomingMessage

from llm_bot.adapters.redis_fair_queue import RedisFairQueue, Taken
from llm_bot.errors import LlmBotError, log_fields

log = structlog.get_logger(__name__)

REQUEUE_AFTER_CHANNEL_LOSS_SECONDS = 1.0


class Settlement(Protocol):
    """The last step of one delivery."""

    async def ack(self) -> None: ...
    async def requeue(self, *, delay: float = 0.0) -> None: ...
    async def reject(self) -> None: ...


class RabbitSettlement:
    """A delivery still held by RabbitMQ (unacked)."""

    def __init__(self, message: AbstractIncomingMessage) -> None:
        self._message = message

    async def ack(self) -> None:
        await self._message.ack()

    async def requeue(self, *, delay: float = 0.0) -> None:  # the broker redelivers at once
        with contextlib.suppress(Exception):
            await self._message.nack(requeue=True)

    async def reject(self) -> None:
        """The queue's dead-letter exchange takes it (no requeue)."""
        with contextlib.suppress(Exception):
            await self._message.reject(requeue=False)


class ParkedSettlement:
    """A delivery the fair queue holds: RabbitMQ let it go when Redis had it.

    If Redis fails while settling, the step is not retried here: the conversation's lease
    lapses, recovery makes it ready again with the same head, and the processed record
    answers that retry with the same candidate (effectively once)."""

    def __init__(
        self,
        *,
        queue: RedisFairQueue,
        taken: Taken,
        dead_letter: Callable[[], Awaitable[None]],
        complete: Callable[[Taken], Awaitable[int]] | None = None,
    ) -> None:
        """``complete``: how the taken delivery is completed (the dispatcher's, which may
        take the next in the same round trip); the queue's own by default."""
        self._queue = queue
        self._taken = taken
        self._dead_letter = dead_letter
        self._complete_taken = complete or queue.complete
        self.remaining: int | None = None
        """How many deliveries of the conversation wait after this one (once acked)."""

    async def ack(self) -> None:
        await self._complete()

    async def requeue(self, *, delay: float = 0.0) -> None:
        try:
            await self._queue.release(self._taken, delay=delay)
        except LlmBotError as exc:
            log.warning("fair.release_failed", **log_fields(exc))

    async def reject(self) -> None:
        """Copied to the dead letters ourselves (no broker delivery is left to reject);
        kept in the queue if even that fails."""
        try:
            await self._dead_letter()
        except Exception:  # nothing is lost: it stays at its conversation's head
            await self.requeue(delay=REQUEUE_AFTER_CHANNEL_LOSS_SECONDS)
            raise
        await self._complete()

    async def _complete(self) -> None:
        try:
            self.remaining = await self._complete_taken(self._taken)
        except LlmBotError as exc:
            log.warning("fair.complete_failed", **log_fields(exc))
