"""Tool results that never came (SPEC 5.9): the memory worker's sweep closes the calls of
a round open longer than ``LLM_BOT_TOOL_RESULT_TIMEOUT_SECONDS`` by publishing, for each,
a ``tool.result`` event with an explicit "no result" content to the service's ingress.
The service handles it like any result (deduplicated, serialized per conversation): the
last one continues the turn, and a real result arriving later finds its call answered and
changes nothing.

Timed by the schedule in Redis (``redis_schedules.py``), not by a timer in a process:
a restart of the service or the worker loses no timeout. Event ids derive from the call,
so a sweep repeated after a crash publishes the same events, which deduplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

from llm_bot.contract import EventSource, InternalEventV2, ToolTrace
from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.tool_rounds import ToolRound, no_result
from llm_bot.ports import ConversationSchedule, MemoryProgress
from llm_bot.service.sweep_drain import drain_due
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

PublishEvent = Callable[[InternalEventV2], Awaitable[None]]


def timeout_event(
    key: ConversationKey, open_round: ToolRound, call_id: str, now: float
) -> InternalEventV2:
    """The ``tool.result`` that closes ``call_id`` for want of a result (a stable id)."""
    digest = hashlib.sha256(
        "\x1f".join((key.tenant_id, key.user_id, key.conversation_id, call_id)).encode()
    ).hexdigest()[:32]
    names = dict(zip(open_round.calls, open_round.names, strict=False))
    return InternalEventV2.model_validate(
        {
            "schema": "internal.event.v2",
            "id": f"tool_timeout_{digest}",
            "type": "tool.result",
            "tenant_id": key.tenant_id,
            "user_id": key.user_id,
            "conversation_id": key.conversation_id,
            "created_at": datetime.fromtimestamp(now, UTC),
            "source": EventSource(platform="llm-bot", channel="tool-timeout"),
            "tool": ToolTrace(
                tool_call_id=call_id, name=names.get(call_id) or None, content=no_result("timeout")
            ),
        }
    )


class ToolTimeouts:
    """Closes the calls of rounds whose results did not come in time."""

    def __init__(
        self,
        *,
        rounds: ConversationSchedule,
        progress: MemoryProgress,
        publish: PublishEvent,
        metrics: Metrics,
    ) -> None:
        self._rounds = rounds
        self._progress = progress
        self._publish = publish
        self._metrics = metrics

    async def run_once(self, now: float) -> int:
        """Publish a "no result" for every open call of the rounds due by ``now``; returns
        how many. A conversation whose round is no longer open just leaves the schedule."""
        closed = 0

        async def close(key: ConversationKey) -> None:
            nonlocal closed
            try:
                closed += await self._close(key, now)
            except LlmBotError as exc:  # Redis or the broker down: the next sweep retries
                log.warning("tool_timeouts.failed", **log_fields(exc))

        await drain_due(lambda limit: self._rounds.due(now, limit), close)
        if closed:
            log.info("tool_timeouts.closed", calls=closed)
        return closed

    async def _close(self, key: ConversationKey, now: float) -> int:
        progress = await self._progress.load(key)
        open_round = progress.memory.tool_round if progress.memory is not None else None
        calls = open_round.open_calls() if open_round is not None else ()
        if open_round is not None:
            for call_id in calls:
                await self._publish(timeout_event(key, open_round, call_id, now))
            if calls:
                self._metrics.tool_rounds.labels("timed_out").inc()
        await self._rounds.unschedule_due(key, now)
        return len(calls)
