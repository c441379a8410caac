"""``llm-bot worker``: the memory worker process, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time

import structlog

from llm_bot.bootstrap import build_worker
from llm_bot.config import Settings
from llm_bot.entrypoints.http_server import HealthServer
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.entrypoints.startup import check_redis, freeze_startup_heap, redis_readiness
from llm_bot.service.idle_sweep import sweep_forever

log = structlog.get_logger(__name__)


async def run_worker(settings: Settings) -> None:
    """Consume memory jobs and sweep idle conversations; drain on SIGTERM/SIGINT."""
    worker = build_worker(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    async def broker_ready() -> str | None:
        return worker.consumer.readiness()

    process, memory = settings.process, settings.memory
    health = HealthServer(
        host=process.http_host,
        port=process.http_port,
        checks={"broker": broker_ready, "redis": lambda: redis_readiness(worker.redis)},
        registry=worker.metrics.registry,
    )
    sweeper: asyncio.Task[None] | None = None
    try:
        await check_redis(worker.redis)
        durability = await check_redis_durability(worker.redis, settings.redis)
        await health.start()
        await worker.consumer.start()
        durability.report(registry=worker.metrics.registry)
        freeze_startup_heap()
        sweeper = asyncio.create_task(
            sweep_forever(
                progress=worker.progress,
                publish=worker.consumer.publish_job,
                idle_seconds=memory.ttl_seconds,
                interval_seconds=memory.sweep_interval_seconds,
                stop=stop,
                clock=time.time,
                also=worker.sweeps(),
                metrics=worker.metrics,
            )
        )
        log.info("worker.ready", http_port=health.port)
        await stop.wait()
        await worker.consumer.stop(grace_seconds=process.shutdown_grace_seconds)
    finally:
        stop.set()
        if sweeper is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        await health.stop()
        await worker.close()
