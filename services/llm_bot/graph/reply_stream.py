"""A reply streamed to the event's ``reply_to`` (SPEC 7.1) as CandidateDeltaV1 messages.

The first piece goes at once (it is what a voice caller waits for); after it, pieces that
arrive within ``interval`` seconds of the last send are gathered and sent together, and
``flush`` sends what is left when the model is done. A model streams a token every 10-20
ms; sending each as its own AMQP message made the consumer and the gateway do ~30 publishes,
parses and SSE writes per reply, which at 32 concurrent streams on a small machine is CPU
taken from the next caller's first token. Pieces are numbered from 0 in each model call (a
retried call starts again at 0, so the gateway can tell the attempts apart).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from llm_bot.contract import CandidateDeltaV1
from llm_bot.contract.messages import candidate_id
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ReplyChannel
from llm_bot.service.commands import ChatEvent


class ReplyStream:
    """A ``DeltaSink`` (``await stream(piece)``) that coalesces, plus ``flush``."""

    def __init__(
        self,
        replies: ReplyChannel,
        reply_to: str,
        *,
        key: ConversationKey,
        event_id: str,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._replies = replies
        self._reply_to = reply_to
        self._event_id = event_id
        self._candidate = candidate_id(key.tenant_id, key.user_id, event_id)
        self._interval = interval
        self._clock = clock
        self._numbers = itertools.count()
        self._pending: list[str] = []
        self._sent_at: float | None = None

    async def __call__(self, piece: str) -> None:
        self._pending.append(piece)
        now = self._clock()
        if self._sent_at is None or now - self._sent_at >= self._interval:
            await self._send(now)

    async def flush(self) -> None:
        """Send the pieces still gathered (the model's reply is complete)."""
        if self._pending:
            await self._send(self._clock())

    async def _send(self, now: float) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        self._sent_at = now
        delta = CandidateDeltaV1.model_construct(  # every field is known-valid here
            candidate_id=self._candidate,
            event_id=self._event_id,
            seq=next(self._numbers),
            delta=text,
        )
        await self._replies.send(self._reply_to, self._event_id, delta)


def stream_for(
    event: ChatEvent, replies: ReplyChannel | None, interval: float
) -> ReplyStream | None:
    """Where the event's reply streams (its ``reply_to``), or None (no streaming)."""
    if replies is None or event.reply_to is None:
        return None
    return ReplyStream(
        replies, event.reply_to, key=event.key, event_id=event.event_id, interval=interval
    )
