"""Bench helpers that run parts of the system in their own processes: the fake model (the
provider, whose CPU is not the service's) and ``llm-bot run`` replicas, with their CPU time
read from ``/proc``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from llm_bot.config import Settings
from tests.support.processes import ConsumerProcess, free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextlib.asynccontextmanager
async def fake_model_process(
    latency: float, stream_rate: float = 0.0, pids: list[int] | None = None
) -> AsyncIterator[str]:
    """``llm-bot fake-model`` in a child process answering after ``latency`` seconds
    (streamed replies paced at ``stream_rate`` pieces per second); yields its base URL once
    it answers (``pids``, when given, receives its process id)."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        "fake-model",
        "--port",
        str(port),
        "--latency",
        str(latency),
        "--stream-rate",
        str(stream_rate),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    if pids is not None:
        pids.append(process.pid)
    try:
        async with aiohttp.ClientSession() as session, asyncio.timeout(30):
            while True:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{base_url}/models") as response:
                        if response.status == 200:
                            break
                if process.returncode is not None:
                    raise RuntimeError("fake model process exited")
                await asyncio.sleep(0.1)
        yield base_url
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


@contextlib.asynccontextmanager
async def replicas(settings: Settings, count: int) -> AsyncIterator[list[ConsumerProcess]]:
    """``count`` ``llm-bot run`` processes on ``settings``, ready (``/readyz``) on yield."""
    log_dir = Path(tempfile.mkdtemp(prefix="llm-bot-bench-"))
    procs = [ConsumerProcess(settings, log_path=log_dir / f"replica{n}.log") for n in range(count)]
    try:
        for proc in procs:
            await proc.start()
        for proc in procs:
            await proc.wait_ready(within=60)
        yield procs
    finally:
        for proc in procs:
            await proc.stop()
