"""``llm-bot dev`` (``make dev``) as a new user runs it, in a shell with no model settings:
once it says it is ready, ``llm-bot ask`` gets the reply, ``memory show`` shows the turn,
the printed login URL's key logs in to the inspector, and one SIGINT stops everything."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import sys
from collections.abc import Callable

import aiohttp
import pytest

from llm_bot.config import Settings
from tests.support.processes import CHILD_WITHIN_SECONDS, free_port, settings_env

# six processes (launcher, model, consumer, worker, inspector, the commands), each may take
# minutes to start on a loaded machine
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


def _two_free_ports() -> int:
    """A port whose next one is free too (the consumer's and the worker's probes)."""
    while True:
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


async def _cli(env: dict[str, str], *argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_bot", *argv, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    return process.returncode or 0, out.decode()


async def _until_ready(stdout: asyncio.StreamReader) -> str:
    """The launcher's output up to and including its "ready" banner."""
    seen: list[str] = []
    async with asyncio.timeout(180):
        while line := (await stdout.readline()).decode():
            seen.append(line)
            if line.startswith("Ctrl-C stops them all."):
                return "".join(seen)
    raise AssertionError("llm-bot dev ended before it was ready:\n" + "".join(seen[-30:]))


async def test_dev_runs_everything_in_one_terminal(make_settings: Callable[..., Settings]) -> None:
    env = {k: v for k, v in settings_env(make_settings()).items() if not k.startswith("OPENAI_")}
    inspector_port = free_port()
    env.update(
        LLM_BOT_HTTP_PORT=str(_two_free_ports()),
        LLM_BOT_INSPECTOR_PORT=str(inspector_port),
        LLM_BOT_INSPECTOR_KEYS="",
    )
    dev = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "llm_bot", "dev", "--model-port", str(free_port())),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert dev.stdout is not None
    try:
        banner = await _until_ready(dev.stdout)
        drain = asyncio.create_task(dev.stdout.read())  # the children's lines from now on
        reply = await _cli(env, "ask", "How much is the blue kettle?")
        ids = ["--tenant", "store_001", "--user", "user123", "--conversation", "sess_1"]
        shown = await _cli(env, "memory", "show", *ids)
        match = re.search(r"inspector: (http://\S+/login)#key=(\S+)", banner)
        assert match is not None, banner
        async with aiohttp.ClientSession() as http:
            form = {"key": match[2]}
            async with http.post(match[1], data=form, allow_redirects=False) as login:
                status = login.status
    finally:
        dev.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(dev.wait(), CHILD_WITHIN_SECONDS)
    await drain
    assert reply == (0, "echo: How much is the blue kettle?\n")
    assert shown[0] == 0
    assert "user: How much is the blue kettle?" in shown[1]
    assert status == 303  # logged in
    assert (
        '.venv/bin/llm-bot ask "How much is the blue kettle?"' in banner or "llm-bot ask" in banner
    )
    assert code == 0
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", inspector_port))  # the inspector stopped with it
