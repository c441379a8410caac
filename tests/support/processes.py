"""``llm-bot run`` as child processes, configured from a ``Settings`` object."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
from pydantic import AliasChoices, SecretStr

from llm_bot.config import Settings


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that reproduces ``settings`` in a child process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_BOT_", "OPENAI_"))}
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        if value is None or not isinstance(info.validation_alias, AliasChoices):
            continue
        variable = str(info.validation_alias.choices[0])
        env[variable] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    return env


READY_WITHIN_SECONDS = 120.0
"""How long a child may take to answer ``/readyz`` 200: a bound, not a timing under test.
Its imports alone take seconds of CPU, and make test runs tests side by side (pytest-xdist)
on a 2-core machine others share, where several children starting at once take well over
30 s."""


CHILD_WITHIN_SECONDS = 180.0
"""How long a test waits for a short-lived ``python -m llm_bot`` child (a command) to end:
a hang guard, as ``READY_WITHIN_SECONDS``, for the same loaded machine."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ConsumerProcess:
    """One ``python -m llm_bot run`` (or ``worker``, or ``gateway``) child with its own HTTP
    port and log."""

    def __init__(self, settings: Settings, *, log_path: Path, command: str = "run") -> None:
        self.command = command
        self.http_port = free_port()  # /healthz, /readyz, /metrics (the gateway's too)
        self.api_port = free_port() if command == "gateway" else None  # the gateway's API
        self._env = settings_env(settings)
        self._env["LLM_BOT_HTTP_PORT"] = str(self.http_port)
        self._env["LLM_BOT_HTTP_HOST"] = "127.0.0.1"
        if self.api_port is not None:
            self._env["LLM_BOT_GATEWAY_PORT"] = str(self.api_port)
            self._env["LLM_BOT_GATEWAY_HOST"] = "127.0.0.1"
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llm_bot",
            self.command,
            env=self._env,
            stdout=log,
            stderr=log,
        )
        log.close()

    async def wait_readyz(self, status: int, within: float = 15.0) -> None:
        """Poll ``/readyz`` until it answers ``status`` (TimeoutError after ``within``)."""
        async with asyncio.timeout(within):
            while await self.readyz() != status:
                await asyncio.sleep(0.1)

    async def readyz(self) -> int:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    f"http://127.0.0.1:{self.http_port}/readyz",
                    timeout=aiohttp.ClientTimeout(total=2),
                ) as response,
            ):
                return response.status
        except (aiohttp.ClientError, TimeoutError):
            return 0

    async def wait_ready(self, within: float = READY_WITHIN_SECONDS) -> None:
        async with asyncio.timeout(within):
            while await self.readyz() != 200:
                if self.process is not None and self.process.returncode is not None:
                    raise RuntimeError(f"consumer exited: see {self.log_path}")
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no drain, no acks; the broker redelivers what it held."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    async def stop(self, within: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), within)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode
