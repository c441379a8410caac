"""Redis's persistence and eviction settings, read at start (SPEC 7.2.1; docs/deployment.md
"Redis for memory"): ``llm-bot run`` refuses an eviction policy that can drop memory with
one line naming it, and starts with a warning and ``llmbot_redis_durable`` 0 on a Redis
that keeps nothing. Each case on a redis-server of its own, configured as it says.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_settings import read_node_settings
from llm_bot.bootstrap import redis_client
from llm_bot.config import ConfigurationError, Settings
from llm_bot.entrypoints.redis_durability import check_redis_durability
from tests.support.processes import ConsumerProcess, settings_env
from tests.support.service_control import private_redis

pytestmark = pytest.mark.integration


async def _run_until_exit(settings: Settings, within: float = 60) -> tuple[int, list[str]]:
    """``llm-bot run`` to its end; its exit status and stderr lines."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        "run",
        env=settings_env(settings),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), within)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return int(process.returncode or 0), stderr.decode().splitlines()


async def _text(session: aiohttp.ClientSession, port: int) -> str:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        return await response.text()


async def test_run_refuses_an_eviction_policy_with_one_line(
    make_settings: Callable[..., Settings],
) -> None:
    with private_redis("--maxmemory-policy", "allkeys-lru") as server:
        settings = make_settings(redis_url=server.url, embeddings="off")
        status, lines = await _run_until_exit(settings)
    assert status != 0
    assert len(lines) == 1, lines
    assert "maxmemory-policy allkeys-lru" in lines[0]
    assert "noeviction" in lines[0]  # the fix


async def test_run_warns_once_and_reports_a_redis_that_keeps_nothing(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    with private_redis() as server:  # --save "" --appendonly no
        settings = make_settings(redis_url=server.url, embeddings="off", log_format="json")
        consumer = ConsumerProcess(settings, log_path=tmp_path / "run.log")
        await consumer.start()
        node = f"127.0.0.1:{server.port}"
        gauge = f'llmbot_redis_durable{{node="{node}"}}'
        try:
            await consumer.wait_ready()
            # set just after the consumer starts, so maybe a moment after /readyz says 200
            async with aiohttp.ClientSession() as session, asyncio.timeout(30):
                while gauge not in (metrics := await _text(session, consumer.http_port)):
                    await asyncio.sleep(0.1)
        finally:
            assert await consumer.stop() == 0
    assert f"{gauge} 0.0" in metrics
    records = [
        json.loads(line)
        for line in (tmp_path / "run.log").read_text().splitlines()
        if line.startswith("{")
    ]
    warnings = [r for r in records if r.get("event") == "redis.not_durable"]
    assert len(warnings) == 1, warnings
    assert warnings[0]["node"] == node
    assert warnings[0]["settings"] == 'appendonly no, save ""'


async def test_require_refuses_what_warn_accepts_and_aof_everysec_is_durable(
    make_settings: Callable[..., Settings],
) -> None:
    with private_redis() as plain, private_redis("--appendonly", "yes") as aof:
        for server, durable in ((plain, False), (aof, True)):
            settings = make_settings(redis_url=server.url, redis_durability="require")
            client = redis_client(settings.redis)
            try:
                (facts,) = await read_node_settings(client, label="node")
                assert facts.durable is durable
                assert facts.values["appendfsync"] == "everysec"
                registry = CollectorRegistry()
                if durable:
                    checked = await check_redis_durability(client, settings.redis)
                    checked.report(registry=registry)
                    value = registry.get_sample_value(
                        "llmbot_redis_durable", {"node": f"127.0.0.1:{server.port}"}
                    )
                    assert value == 1.0
                else:
                    with pytest.raises(ConfigurationError, match="appendonly no"):
                        await check_redis_durability(client, settings.redis)
            finally:
                await client.aclose()
