"""The clients' README examples, run as an integrator would (a process of their own)
against the real broker and the service: each prints a candidate's text, then a streamed
reply. Only the broker URL and the service's routing names are the test's own."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from tests.support.harness import bot
from tests.support.processes import CHILD_WITHIN_SECONDS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = "echo: How much is the blue kettle?\necho: And the red one?\n"


def _python_example(settings: Settings) -> str:
    text = (ROOT / "clients" / "python" / "README.md").read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the client's README: expected one python example"
    old = 'Client("amqp://guest:guest@localhost:5672/")'
    assert blocks[0].count(old) == 1, f"the example: expected {old} once"
    new = (
        f"Client({settings.amqp_url.get_secret_value()!r}, "
        f"exchange={settings.ingress_exchange!r}, routing_key={settings.ingress_routing_key!r})"
    )
    return blocks[0].replace(old, new)


async def test_the_python_clients_readme_example(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    path = tmp_path / "example.py"
    path.write_text(_python_example(settings), encoding="utf-8")
    async with bot(settings):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    assert (process.returncode, err.decode()) == (0, "")
    assert out.decode() == EXPECTED
