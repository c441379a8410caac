"""``clients/python`` (the ``llm-bot-client`` distribution): a wheel of the client, the wire
contract and the AMQP URL rules only, needing aio-pika and pydantic and nothing of the
service (no model SDK, Redis, LangGraph, telemetry or logging libraries)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVICE_ONLY = (
    "openai",
    "langgraph",
    "redis",
    "structlog",
    "numpy",
    "onnxruntime",
    "fastapi",
    "uvicorn",
    "opentelemetry",
    "prometheus_client",
    "tiktoken",
    "yaml",
)

PROBE = f"""
import importlib.abc, sys
BLOCKED = {SERVICE_ONLY!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"the client imported {{name}}")
        return None
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import llm_bot.client
from llm_bot.client import events
assert llm_bot.client.__file__.startswith(sys.argv[1]), llm_bot.client.__file__
where = events.Conversation("store_001", "user123", "sess_1")
print(events.message("hi", where).prompt_text())
"""


def test_the_client_wheel_holds_the_client_and_needs_only_aio_pika_and_pydantic(
    tmp_path: Path,
) -> None:
    source = tmp_path / "python"
    shutil.copytree(ROOT / "clients" / "python", source, symlinks=False)  # links resolved
    build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")]
    subprocess.run(  # noqa: S603  # this interpreter's pip on the repository's own sources
        [sys.executable, "-m", "pip", *build, str(source)],
        check=True,
        timeout=120,
    )
    (wheel,) = (tmp_path / "dist").glob("llm_bot_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("/METADATA"))).decode()
        archive.extractall(tmp_path / "site")
    packaged = {n.rsplit("/", 1)[0] for n in names if n.endswith(".py")}
    assert packaged == {"llm_bot", "llm_bot/client", "llm_bot/contract"}
    requires = sorted(line for line in metadata.splitlines() if line.startswith("Requires-Dist"))
    assert requires == ["Requires-Dist: aio-pika>=9.4", "Requires-Dist: pydantic>=2.7"]
    probe = subprocess.run(  # noqa: S603  # this interpreter on this module's probe
        [sys.executable, "-c", PROBE, str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "hi"
