"""Which settings groups each process reads, as docs/configuration.md "Settings groups"
says: the wiring of ``run``, ``worker``, ``gateway`` and ``inspect`` is built against
settings that record the groups read."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from llm_bot.bootstrap import build_service, build_worker
from llm_bot.config import Settings
from llm_bot.entrypoints.gateway import build_gateway
from llm_bot.inspector.access_keys import InspectorKeys
from llm_bot.inspector.wiring import build_inspector

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = ("run", "worker", "gateway", "inspect")

ENTRYPOINT_READS = {
    "run": {"process", "model", "logging"},
    "worker": {"process", "memory", "logging"},
    "gateway": {"gateway", "process", "logging"},
    "inspect": {"inspector", "broker", "logging"},
}
"""What a process reads beyond its wiring: the command line's logging, the entrypoint's
ports and log lines, and the inspector's DLQ page (read per request)."""


class Reads:
    """Settings that record which of their groups (attributes) are read."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._settings, name)


def documented_readers() -> dict[str, set[str]]:
    """Process → the groups whose "read by" cell names it."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Settings groups\n") :]
    readers: dict[str, set[str]] = {process: set() for process in PROCESSES}
    for line in section.splitlines():
        row = re.match(r"^\| `([a-z_]+)(?:\(\))?` \| .* \| (.*) \|$", line)
        if row is None:
            continue
        group, read_by = row[1], row[2]
        named = set(re.findall(r"`([a-z]+)`", read_by))
        for process in PROCESSES:
            if process in named or read_by.startswith("every command"):
                readers[process].add(group)
    return readers


async def test_each_process_reads_the_groups_the_docs_name(
    make_settings: Callable[..., Settings],
) -> None:
    """The groups a process's wiring and entrypoint read are those documented for it."""
    budgets = "*=1000000/day"  # with budgets, the gateway reads Redis too
    settings = make_settings(embeddings="off", tenant_token_budgets=budgets)
    built: dict[str, set[str]] = {}

    reads = Reads(settings)
    service = build_service(cast(Settings, reads))
    await service.close()
    built["run"] = reads.read

    reads = Reads(settings)
    worker = build_worker(cast(Settings, reads))
    await worker.close()
    built["worker"] = reads.read

    reads = Reads(settings)
    gateway = build_gateway(cast(Settings, reads), handle_signals=False)
    await gateway.close()
    built["gateway"] = reads.read

    reads = Reads(settings)
    inspector = build_inspector(cast(Settings, reads), keys=InspectorKeys())
    await inspector.close()
    built["inspect"] = reads.read

    documented = documented_readers()
    for process in PROCESSES:
        assert built[process] | ENTRYPOINT_READS[process] == documented[process], process
