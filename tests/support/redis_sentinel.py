"""A Redis Sentinel of a test's own, watching a private redis-server (``service_control``):
for ``REDIS_URL=redis+sentinel://...`` (operators with HA but no cluster)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.service_control import free_port, listening, private_redis

SERVICE = "llmbot-test"


@dataclass(frozen=True)
class SentinelWatching:
    url: str
    """``REDIS_URL`` naming the master through the Sentinel."""
    master_port: int


@contextlib.contextmanager
def sentinel_watching_a_master() -> Iterator[SentinelWatching]:
    directory = Path(tempfile.mkdtemp(prefix="llmbot-sentinel-"))
    port = free_port()
    process: subprocess.Popen[bytes] | None = None
    try:
        with private_redis() as master:
            config = directory / "sentinel.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 1\n"
            )
            process = subprocess.Popen(  # noqa: S603  # a fixed command
                ["redis-server", str(config), "--sentinel"],  # noqa: S607  # from PATH
                stdout=(directory / "sentinel.out").open("ab"),
                stderr=subprocess.STDOUT,
            )
            _wait_listening(port)
            yield SentinelWatching(f"redis+sentinel://127.0.0.1:{port}/{SERVICE}/0", master.port)
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 15
    while not listening(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis sentinel did not listen on {port}")
        time.sleep(0.05)
