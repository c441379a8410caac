"""The inspector yields the CPU to the service beside it."""

from __future__ import annotations

import os
import subprocess
import sys

from llm_bot.inspector.serve import NICENESS


def test_the_inspector_runs_at_a_lower_cpu_priority() -> None:
    """``yield_cpu`` (called as ``llm-bot inspect`` starts) raises the process's niceness,
    so a consumer on the same machine is scheduled first. Run in a child process: niceness
    cannot be lowered back without privileges."""
    before = os.nice(0)
    child = subprocess.run(
        [sys.executable, "-c", "from llm_bot.inspector.serve import yield_cpu; print(yield_cpu())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(child.stdout.strip()) == min(before + NICENESS, 19)
