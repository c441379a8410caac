"""``llm-bot inspect`` and ``llm-bot memory why`` in a shell with no model settings (no
``OPENAI_*`` at all): they read Redis only, so they start, log in and dry-run a prompt."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable

import aiohttp
import pytest

from llm_bot.config import Settings
from llm_bot.inspector.access_keys import key_digest
from tests.support.processes import CHILD_WITHIN_SECONDS, free_port, settings_env

pytestmark = pytest.mark.e2e

KEY = "a-key-for-this-test-only"


def _env_without_model(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in settings_env(settings).items() if not k.startswith("OPENAI_")}
    env["LLM_BOT_EMBEDDINGS"] = "local"
    env["LLM_BOT_INSPECTOR_KEYS"] = f"*={key_digest(KEY)}"
    return env


async def test_the_inspector_starts_and_logs_in_without_model_settings(
    make_settings: Callable[..., Settings],
) -> None:
    env = _env_without_model(make_settings())
    port = free_port()
    env.update(LLM_BOT_INSPECTOR_PORT=str(port), LLM_BOT_INSPECTOR_HOST="127.0.0.1")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_bot", "inspect", env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with aiohttp.ClientSession() as http:
            status = await _login(http, port, process)
        assert status == 303  # the key logged in: redirected to the home page
    finally:
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    assert "OPENAI" not in stderr.decode()


async def _login(
    http: aiohttp.ClientSession, port: int, process: asyncio.subprocess.Process
) -> int:
    url = f"http://127.0.0.1:{port}/login"
    async with asyncio.timeout(60):
        while True:
            assert process.returncode is None, "llm-bot inspect exited"
            try:
                async with http.post(url, data={"key": KEY}, allow_redirects=False) as response:
                    return response.status
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.2)


async def test_memory_why_runs_without_model_settings(
    make_settings: Callable[..., Settings],
) -> None:
    env = _env_without_model(make_settings())
    argv = ["memory", "why", "--tenant", "t1", "--user", "u1", "--conversation", "c1"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        *argv,
        "--message",
        "hello",
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    assert process.returncode == 0, err.decode()
    assert json.loads(out)["budget"] > 0  # the dry run's prompt budget: it ran
