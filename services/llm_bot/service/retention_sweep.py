"""Retention without writes (SPEC 5.5): the worker's sweep ages out the long-term memory
of users who are due, whether or not they are still talking.

Every write schedules the user (``RedisLongTermStore.apply_retention``) for when their
oldest remaining item ages out; each sweep takes the users who are due, applies
retention under their current erasure generation (which reschedules them, or drops them
when nothing is left), removes the evicted items' retrieval-index entries, and prunes the
index entries of their conversations whose raw trace expired. Failures are per user: the
user stays due and the next sweep tries again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import structlog

from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.retention import RetentionPlan
from llm_bot.service.sweep_drain import drain_due
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

SWEEP_USERS = 100
"""Users read per batch; a sweep goes on batch after batch until none is due."""


class RetentionTarget(Protocol):
    async def due(self, now: float, limit: int = SWEEP_USERS) -> list[tuple[str, str]]: ...

    async def due_count(self, now: float) -> int: ...

    async def apply_retention(
        self, tenant_id: str, user_id: str, *, erasure: str
    ) -> RetentionPlan: ...


class ErasureGeneration(Protocol):
    async def erasure(self, tenant_id: str, user_id: str) -> str: ...


class IndexPruning(Protocol):
    async def remove_long_term(
        self, tenant_id: str, user_id: str, evicted: Mapping[str, Sequence[str]]
    ) -> int: ...

    async def prune_expired(self, tenant_id: str, user_id: str) -> int: ...


class RetentionSweep:
    """Applies age retention to the users who are due."""

    def __init__(
        self,
        *,
        ltm: RetentionTarget,
        marks: ErasureGeneration,
        index: IndexPruning | None,
        metrics: Metrics,
    ) -> None:
        self._ltm = ltm
        self._marks = marks
        self._index = index
        self._metrics = metrics

    async def run_once(self, now: float) -> int:
        """Apply retention to every user due by ``now`` (``drain_due``: within its time
        budget; a user whose retention failed waits for the next sweep); returns the
        number of items evicted."""
        evicted = 0

        async def apply(user: tuple[str, str]) -> None:
            nonlocal evicted
            try:
                evicted += await self._apply(*user)
            except LlmBotError as exc:  # erased meanwhile, Redis down: next sweep
                log.warning(
                    "retention.sweep_failed",
                    tenant_id=user[0],
                    **log_fields(exc),
                )

        await drain_due(lambda limit: self._ltm.due(now, limit), apply, batch=SWEEP_USERS)
        self._metrics.sweep_backlog.labels("retention").set(await self._ltm.due_count(now))
        if evicted:
            log.info("retention.swept", evicted=evicted)
        return evicted

    async def _apply(self, tenant_id: str, user_id: str) -> int:
        erasure = await self._marks.erasure(tenant_id, user_id)
        plan = await self._ltm.apply_retention(tenant_id, user_id, erasure=erasure)
        for kind, ids in plan.evicted.items():
            self._metrics.ltm_evictions.labels(kind).inc(len(ids))
        if self._index is not None:
            await self._index.remove_long_term(tenant_id, user_id, plan.evicted)
            await self._index.prune_expired(tenant_id, user_id)
        return plan.count()
