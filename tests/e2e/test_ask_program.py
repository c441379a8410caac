"""The raw AMQP recipe of docs/contract.md ("Other languages"), run as a newcomer would:
twice with different text (each run prints its own answer), and with the model down (it
prints the ErrorV1 instead of waiting forever).

The program is taken from docs/contract.md as it stands; only the broker URL and the routing
keys are swapped for this test's own (each literal must be there exactly once, so an edit of
the page that this test would silently miss fails it instead).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.scripts import Fault
from tests.support.harness import bot
from tests.support.processes import CHILD_WITHIN_SECONDS

pytestmark = pytest.mark.e2e

PAGE = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
SECTION = "\n## Other languages: the raw AMQP recipe\n"


def _program(settings: Settings) -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "no python block in the section"
    program = match.group(1)
    swaps = {
        '"amqp://guest:guest@localhost:5672/"': repr(settings.amqp_url.get_secret_value()),
        '"internal.llmbot.v1"': repr(settings.ingress_routing_key),
        '"internal.candidate.v1"': repr(settings.candidate_routing_key),
        '"internal.llmbot.error.v1"': repr(settings.error_routing_key),
    }
    for old, new in swaps.items():
        assert program.count(old) == 1, f"the program: expected {old} once"
        program = program.replace(old, new)
    exchange = r'declare_exchange\(\s*"internal"'
    assert len(re.findall(exchange, program)) == 1, "the program: expected the exchange once"
    return re.sub(exchange, f"declare_exchange({settings.ingress_exchange!r}", program)


async def _run(path: Path, text: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        text,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    return process.returncode or 0, out.decode().strip(), err.decode().strip()


async def test_ask_program_prints_each_runs_own_answer(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    path = tmp_path / "ask.py"
    path.write_text(_program(settings))
    async with bot(settings):
        first = await _run(path, "How much is the blue kettle?")
        second = await _run(path, "And the red one?")
    assert first == (0, "echo: How much is the blue kettle?", "")
    assert second == (0, "echo: And the red one?", "")


async def test_ask_program_prints_the_error_when_the_model_is_down(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.script(*[Fault.status(503)] * 2)
    settings = make_settings(max_attempts=2, retry_base_seconds=0.02)
    path = tmp_path / "ask.py"
    path.write_text(_program(settings))
    async with bot(settings):
        code, out, err = await _run(path, "hello?")
    assert code == 1
    assert out == ""
    assert err.startswith("error model_error: ")
