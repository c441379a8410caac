"""``llm-bot inspect``: serve the inspector on ``LLM_BOT_INSPECTOR_PORT`` (refuses to start
without ``LLM_BOT_INSPECTOR_KEYS``); ``llm-bot memory why`` prints a dry run."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import structlog
import uvicorn

from llm_bot.config import Settings
from llm_bot.delivery.process_tuning import SERVING_TUNING
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.entrypoints.startup import check_redis
from llm_bot.inspector.access_keys import InspectorKeys
from llm_bot.inspector.app import create_app
from llm_bot.inspector.why import dry_run
from llm_bot.inspector.wiring import build_inspector, inspector_keys
from llm_bot.memory.conversation_key import ConversationKey

log = structlog.get_logger(__name__)

NICENESS = 10
"""How much lower the inspector's CPU priority is than the processes beside it: on a
machine shared with the consumer, the product's replies come first and an operator's page
waits (tests/bench/inspector_beside.py: at equal priority, 5 page loads per second took
half the consumer's throughput on a loaded 2-core machine)."""


def yield_cpu() -> int:
    """Lower this process's CPU priority by ``NICENESS``; returns the new niceness (the
    same when the platform refuses)."""
    try:
        return os.nice(NICENESS)
    except OSError:  # pragma: no cover - a platform without nice, or a capped one
        return os.nice(0)


async def run_inspector(settings: Settings) -> None:
    listen = settings.inspector
    inspector_keys(listen)  # refuses (one line) before anything connects
    niceness = yield_cpu()
    inspector = build_inspector(settings)
    try:
        await check_redis(inspector.base.redis)
        (await check_redis_durability(inspector.base.redis, settings.redis)).report(registry=None)
        config = uvicorn.Config(
            create_app(inspector),
            host=listen.host,
            port=listen.port,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_keep_alive=5,
        )
        log.info(
            "inspector.listening",
            host=listen.host,
            port=listen.port,
            niceness=niceness,
        )
        # The collector tuned as a consumer tunes it: with a big user's index and facts in
        # memory, full collections every few pages were the user page's tail (p95 143 ms
        # -> 18 ms in tests/bench/inspector.py).
        SERVING_TUNING.hold()
        try:
            await uvicorn.Server(config).serve()
        finally:
            SERVING_TUNING.release()
    finally:
        await inspector.close()


async def why(
    settings: Settings, key: ConversationKey, message: str, at: datetime
) -> dict[str, Any]:
    """``llm-bot memory why``: the inspector's dry run, without a key (the terminal's user
    reads Redis already)."""
    inspector = build_inspector(settings, keys=InspectorKeys())
    try:
        return await dry_run(inspector.context, key, message, at)
    finally:
        await inspector.close()
