"""``llm-bot inspect``: serve the inspector on ``LLM_BOT_INSPECTOR_PORT`` (refuses to start
without ``LLM_BOT_INSPECTOR_KEYS``); ``llm-bot memory why`` prints a dry run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
import uvicorn

from llm_bot.config import Settings
from llm_bot.entrypoints.startup import check_redis
from llm_bot.inspector.access_keys import InspectorKeys
from llm_bot.inspector.app import create_app
from llm_bot.inspector.why import dry_run
from llm_bot.inspector.wiring import build_inspector, inspector_keys
from llm_bot.memory.working import ConversationKey

log = structlog.get_logger(__name__)


async def run_inspector(settings: Settings) -> None:
    inspector_keys(settings)  # refuses (one line) before anything connects
    inspector = build_inspector(settings)
    try:
        await check_redis(inspector.base.redis)
        config = uvicorn.Config(
            create_app(inspector),
            host=settings.inspector_host,
            port=settings.inspector_port,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_keep_alive=5,
        )
        log.info("inspector.listening", host=settings.inspector_host, port=settings.inspector_port)
        await uvicorn.Server(config).serve()
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
