"""Stopping and starting the machine's own RabbitMQ and Redis in fault tests.

The start commands are the machine's documented ones. Redis keeps nothing on disk here,
so a restart that must keep data shuts down with SAVE and the dump is removed afterwards,
leaving Redis as it was found.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

REDIS_DIR = Path("/var/lib/redis")
REDIS_START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    str(REDIS_DIR),
    "--logfile",
    "/var/log/redis/ci.log",
]


def _run(command: list[str], *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, check=check, capture_output=True, timeout=120)  # noqa: S603  # fixed commands of this module


def rabbit_stop_app() -> None:
    _run(["rabbitmqctl", "stop_app"])


def rabbit_start_app() -> None:
    _run(["rabbitmqctl", "start_app"])
    _run(["rabbitmqctl", "await_startup"], check=False)


def redis_ping() -> bool:
    return _run(["redis-cli", "ping"], check=False).stdout.strip() == b"PONG"


def redis_shutdown_saving() -> None:
    _run(["redis-cli", "shutdown", "save"], check=False)
    deadline = time.monotonic() + 10
    while redis_ping() and time.monotonic() < deadline:
        time.sleep(0.05)


def redis_start() -> None:
    """Start Redis (loading the dump a saving shutdown left), wait for PONG, drop the dump."""
    Path("/var/log/redis").mkdir(parents=True, exist_ok=True)
    _run(REDIS_START)
    deadline = time.monotonic() + 10
    while not redis_ping() and time.monotonic() < deadline:
        time.sleep(0.05)
    (REDIS_DIR / "dump.rdb").unlink(missing_ok=True)
