"""Flows nobody answered (SPEC 5.10): the memory worker's sweep ends each flow that has
waited for a reply longer than ``LLM_BOT_FLOW_TTL_SECONDS`` with an ``expired``
FlowResultV1, then deletes its checkpoint.

Timed by the schedule in Redis (``RedisKeys.flows``), not by a timer in a process: a
restart loses no expiry. Each conversation is expired under its lease, so a reply that
arrives at the same moment either advances the flow first (and the flow is no longer due)
or finds it ended. The result's id is the flow's: a sweep repeated after a crash between
the publish and the delete publishes the same result again, which subscribers deduplicate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import structlog

from llm_bot.contract import FlowResultV1
from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ConversationLease
from llm_bot.service.flow_runner import FlowRunner
from llm_bot.service.sweep_drain import drain_due
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

PublishFlowResult = Callable[[FlowResultV1], Awaitable[None]]


class FlowExpiry:
    """Ends the flows whose time ran out."""

    def __init__(
        self,
        *,
        runner: FlowRunner,
        lease: ConversationLease,
        publish: PublishFlowResult,
        metrics: Metrics,
    ) -> None:
        self._runner = runner
        self._lease = lease
        self._publish = publish
        self._metrics = metrics

    async def run_once(self, now: float) -> int:
        """Expire every flow due by ``now``; returns how many."""
        expired = 0
        at = datetime.fromtimestamp(now, UTC)

        async def expire(key: ConversationKey) -> None:
            nonlocal expired
            try:
                async with self._lease.hold(key):
                    result = await self._runner.expired(key, at)
                    if result is None:
                        return
                    await self._publish(result)
                    await self._runner.finish(key, result.id)
            except LlmBotError as exc:  # Redis or the broker down: the next sweep retries
                log.warning("flow_expiry.failed", **log_fields(exc))
                return
            self._metrics.flow_results.labels("expired").inc()
            log.info("flow.expired", flow=result.flow, conversation_id=key.conversation_id)
            expired += 1

        await drain_due(lambda limit: self._runner.due(now, limit), expire)
        return expired
