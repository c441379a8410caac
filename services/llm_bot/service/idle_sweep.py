"""Finalizing idle conversations (SPEC 5.6) by a sweep over the activity sorted set, not
Redis keyspace notifications (which are lossy and off by default)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import structlog

from llm_bot.contract import MemoryJobV1
from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import MemoryProgress
from llm_bot.service.sweep_drain import SWEEP_BATCH, SWEEP_BUDGET_SECONDS, drain_due
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

PublishJob = Callable[[MemoryJobV1], Awaitable[None]]


async def sweep_once(
    *,
    progress: MemoryProgress,
    publish: PublishJob,
    idle_seconds: float,
    now: float,
    budget_seconds: float = SWEEP_BUDGET_SECONDS,
) -> int:
    """Queue a finalize job for every conversation idle past ``idle_seconds`` (batch after
    batch until none is due or ``budget_seconds`` passed; the next sweep goes on); returns
    how many. The job is published (confirmed) before the conversation leaves the activity
    set, so a crash in between only repeats a job, which the worker deduplicates by id."""
    queued = 0

    async def finalize(item: tuple[ConversationKey, float]) -> None:
        nonlocal queued
        queued += await _queue_finalize(progress, publish, [item], now)

    await drain_due(
        lambda limit: progress.idle(before=now - idle_seconds, limit=limit),
        finalize,
        budget_seconds=budget_seconds,
        batch=SWEEP_BATCH,
    )
    if queued:
        log.info("sweep.finalize_queued", conversations=queued)
    return queued


async def _queue_finalize(
    progress: MemoryProgress,
    publish: PublishJob,
    batch: Sequence[tuple[ConversationKey, float]],
    now: float,
) -> int:
    queued = 0
    for key, seen in batch:
        member = f"{key.tenant_id}|{key.user_id}|{key.conversation_id}"  # as in the activity set
        digest = hashlib.sha256(f"{member}|{seen}".encode()).hexdigest()[:24]
        await publish(
            MemoryJobV1(
                id=f"idle_{digest}",
                kind="finalize",
                tenant_id=key.tenant_id,
                user_id=key.user_id,
                conversation_id=key.conversation_id,
                turn=0,
                created_at=datetime.fromtimestamp(now, UTC),
            )
        )
        await progress.clear_activity(key, seen)
        queued += 1
    return queued


async def sweep_forever(
    *,
    progress: MemoryProgress,
    publish: PublishJob,
    idle_seconds: float,
    interval_seconds: float,
    stop: asyncio.Event,
    clock: Callable[[], float],
    also: Sequence[Callable[[float], Awaitable[int]]] = (),
    metrics: Metrics | None = None,
    budget_seconds: float = SWEEP_BUDGET_SECONDS,
) -> None:
    """Sweep every ``interval_seconds`` until ``stop`` is set: idle conversations, then
    each of ``also`` (the retention of users who are due, the tool calls that timed out).
    Failures are logged and the next sweep tries again."""
    while not stop.is_set():
        try:
            now = clock()
            await sweep_once(
                progress=progress,
                publish=publish,
                idle_seconds=idle_seconds,
                now=now,
                budget_seconds=budget_seconds,
            )
            if metrics is not None:
                left = await progress.idle_count(before=now - idle_seconds)
                metrics.sweep_backlog.labels("idle").set(left)
            for sweep in also:
                await sweep(clock())
        except LlmBotError as exc:  # Redis failures arrive as MemoryUnavailable
            log.warning("sweep.failed", **log_fields(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_seconds)
