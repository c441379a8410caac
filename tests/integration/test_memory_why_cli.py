"""``llm-bot memory why`` in the terminal: the CLI's own function prints the dry run's
breakdown (sections with tokens, what the budget left out, recalled items with their
scores) for a user seeded through the broker, and the same data as JSON."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from llm_bot.cli.memory import run_memory
from llm_bot.cli.parser import build_parser
from llm_bot.inspector.access_keys import key_digest
from tests.support.inspector import inspector_settings, seed_user
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

QUESTION = "Where do I live now, Chiang Mai?"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")
"""The test run's structlog lines (the CLI's own output has none)."""


async def test_memory_why_prints_the_breakdown_and_its_json(
    service_urls: ServiceUrls, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text: the totals line, the four sections, the budget line and the planted fact
    among the recalled items with its keyword and fused scores; --json: the same run as
    data, nothing written to the conversation."""
    async with inspector_settings(service_urls, f"*={key_digest('unused')}") as settings:
        user = await seed_user(settings)
        capsys.readouterr()  # the seeding's logs
        ids = [
            "--tenant",
            user.tenant_id,
            "--user",
            user.user_id,
            "--conversation",
            user.second.conversation_id,
            "--message",
            QUESTION,
            "--at",
            "2026-01-05T10:00:00",
        ]
        for argv in (["memory", "why", *ids], ["memory", "why", *ids, "--json"]):
            args = build_parser().parse_args(argv)  # the CLI's own parser
            code = await asyncio.to_thread(run_memory, args, settings)
            assert code == 0
        out = capsys.readouterr().out.splitlines()
    printed = [line for line in out if not LOG_LINE.match(line)]
    lines, as_json = printed[: printed.index("{")], "\n".join(printed[printed.index("{") :])
    assert lines[0].startswith(
        f"prompt for {user.tenant_id}/{user.user_id}/{user.second.conversation_id} at "
        "2026-01-05T10:00:00: "
    )
    assert "retrieval searched" in lines[0]
    sections = [line.split()[0] for line in lines[lines.index("sections:") + 1 :][:4]]
    assert sections == ["system", "memory", "window", "current"]
    assert any(line.startswith("left out for the budget: ") for line in lines)
    planted = [line for line in lines if "Chiang Mai" in line and line.startswith("  #")]
    assert planted
    assert " keyword " in planted[0]
    assert " fused " in planted[0]
    data = json.loads(as_json)
    assert data["retrieval"] == "searched"
    assert data["at"].startswith("2026-01-05T10:00:00")
    assert any("Chiang Mai" in item["text"] for item in data["recalled"])
    assert data["prompt"][-1] == {"role": "user", "content": QUESTION}
