"""``llm-bot run``: the consumer process, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import structlog

from llm_bot.bootstrap import build_service
from llm_bot.config import Settings
from llm_bot.entrypoints.http_server import HealthServer
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.entrypoints.startup import check_redis, freeze_startup_heap, redis_readiness

log = structlog.get_logger(__name__)


async def run_consumer(settings: Settings) -> None:
    """Start consuming; on SIGTERM/SIGINT drain within the grace period and exit."""
    service = build_service(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    process = settings.process
    health = HealthServer(
        host=process.http_host,
        port=process.http_port,
        checks={
            "broker": _async(service.consumer.readiness),
            "redis": lambda: redis_readiness(service.redis),
        },
        registry=service.metrics.registry,
    )
    try:
        await check_redis(service.redis)
        durability = await check_redis_durability(service.redis, settings.redis)
        await health.start()
        await service.consumer.start()
        durability.report(registry=service.metrics.registry)
        freeze_startup_heap()
        log.info(
            "service.ready",
            model=settings.model.name,
            api=settings.model.api,
            http_port=health.port,
        )
        await stop.wait()
        log.info("service.stopping", in_flight=service.consumer.in_flight)
        await service.consumer.stop(grace_seconds=process.shutdown_grace_seconds)
    finally:
        await health.stop()
        await service.close()


def _async(check: Callable[[], str | None]) -> Callable[[], Awaitable[str | None]]:
    async def wrapped() -> str | None:
        return check()

    return wrapped
