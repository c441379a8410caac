"""Sweeps work until nothing is due, not a fixed count per tick (service/idle_sweep.py)."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from llm_bot.contract import MemoryJobV1
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.idle_sweep import sweep_forever, sweep_once
from llm_bot.service.sweep_drain import SWEEP_BATCH, drain_due
from llm_bot.telemetry.metrics import Metrics
from tests.support.in_memory import InMemoryProgress


async def test_every_idle_conversation_is_queued_in_one_sweep() -> None:
    """2.5 batches of idle conversations: all are queued by one sweep, the active one not."""
    progress = InMemoryProgress()
    idle = [ConversationKey("t", f"u{n}", "c") for n in range(SWEEP_BATCH * 5 // 2)]
    for key in idle:
        progress.activity[key] = 100.0
    progress.activity[ConversationKey("t", "busy", "c")] = 990.0
    published: list[MemoryJobV1] = []

    async def publish(job: MemoryJobV1) -> None:
        published.append(job)

    queued = await sweep_once(progress=progress, publish=publish, idle_seconds=60, now=1000.0)
    assert queued == len(idle)
    assert {(j.user_id, j.kind) for j in published} == {(k.user_id, "finalize") for k in idle}
    assert list(progress.activity) == [ConversationKey("t", "busy", "c")]


async def test_a_sweep_stops_at_its_time_budget_and_the_next_one_goes_on() -> None:
    """With no time left, one batch is done; the rest waits for the next sweep."""
    progress = InMemoryProgress()
    for n in range(SWEEP_BATCH * 2):
        progress.activity[ConversationKey("t", f"u{n}", "c")] = 100.0

    async def publish(_: MemoryJobV1) -> None:
        return None

    first = await sweep_once(
        progress=progress, publish=publish, idle_seconds=60, now=1000.0, budget_seconds=0.0
    )
    second = await sweep_once(progress=progress, publish=publish, idle_seconds=60, now=1000.0)
    assert (first, second) == (SWEEP_BATCH, SWEEP_BATCH)


async def test_what_a_sweep_leaves_due_is_the_backlog_metric() -> None:
    """llmbot_sweep_backlog{sweep="idle"}: the idle conversations a sweep left (its time
    budget spent), read after the sweep."""
    progress = InMemoryProgress()
    for n in range(SWEEP_BATCH * 2 + 10):
        progress.activity[ConversationKey("t", f"u{n}", "c")] = 100.0
    registry = CollectorRegistry()
    stop = asyncio.Event()

    def clock() -> float:
        stop.set()  # one sweep, then the loop ends
        return 1000.0

    async def publish(_: MemoryJobV1) -> None:
        return None

    await sweep_forever(
        progress=progress,
        publish=publish,
        idle_seconds=60,
        interval_seconds=0.01,
        stop=stop,
        clock=clock,
        metrics=Metrics(registry=registry),
        budget_seconds=0.0,
    )
    backlog = registry.get_sample_value("llmbot_sweep_backlog", {"sweep": "idle"})
    assert backlog == SWEEP_BATCH + 10


async def test_drain_handles_every_due_item_once_and_failures_never_starve_the_rest() -> None:
    """250 due items, the first 120 of which stay due after handling (their handling
    failed): every item is handled exactly once in one sweep."""
    schedule = list(range(250))
    stuck = set(range(120))
    handled: list[int] = []

    async def due(limit: int) -> list[int]:
        return schedule[:limit]

    async def handle(item: int) -> None:
        handled.append(item)
        if item not in stuck:
            schedule.remove(item)

    assert await drain_due(due, handle) == 250
    assert sorted(handled) == list(range(250))
    assert schedule == sorted(stuck)
