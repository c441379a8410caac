"""The TypeScript client's own tests (``clients/typescript``, ``node --test``: the calls and
its README example) against the real broker and the service, run here so that ``make test``
and CI run them: this test starts the service (in-process, queue names of its own) on a fake
model that asks for every tool a message offers, then runs ``npm test`` beside it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from llm_bot.fake_model import FakeModelServer, RecordedRequest, ToolCalls
from llm_bot.fake_model.scripts import Reply, default_responder
from tests.support.harness import bot, settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.e2e

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def tool_responder(request: RecordedRequest) -> Reply:
    """Offered tools, it calls each once; given their results, it reads them out."""
    messages = request.messages()
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, str(message.get("content")))
    if results:
        return "the tools said: " + " | ".join(results)
    tools = request.body.get("tools") or []
    if tools:
        return ToolCalls.of(*((tool["function"]["name"], "{}") for tool in tools))
    return default_responder(request)


@pytest.mark.timeout(300)
async def test_the_typescript_clients_tests_pass_against_the_service(
    service_urls: ServiceUrls,
) -> None:
    npm = shutil.which("npm")
    assert npm is not None, "npm is missing: install Node.js 20 with npm"
    assert (PACKAGE / "node_modules").is_dir(), "run make ts-install (npm ci) first"
    async with FakeModelServer(responder=tool_responder) as model:
        model.set_latency(0.5)  # the reconnection test cuts the wire while the model answers
        settings = settings_for_test(service_urls, model.base_url)
        env = dict(
            os.environ,
            LLMBOT_TEST_AMQP_URL=settings.amqp_url.get_secret_value(),
            LLMBOT_TEST_EXCHANGE=settings.ingress_exchange,
            LLMBOT_TEST_ROUTING_KEY=settings.ingress_routing_key,
        )
        async with bot(settings):
            process = await asyncio.create_subprocess_exec(
                npm,
                "test",
                cwd=PACKAGE,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(process.communicate(), 240)
    report = out.decode()
    assert process.returncode == 0, report[-6000:]
    passed = re.search(r"^# pass (\d+)$", report, re.M)
    failed = re.search(r"^# fail (\d+)$", report, re.M)
    assert passed is not None, report[-3000:]
    assert failed is not None, report[-3000:]
    assert (int(passed[1]), int(failed[1])) == (8, 0), report[-3000:]


async def test_the_typescript_types_check_fails_when_a_schema_changes(tmp_path: Path) -> None:
    """``make lint``'s drift check: the generated types against ``schemas/`` as they are
    (in step), then against a copy where one schema gained a field (stale, named)."""
    node = shutil.which("node")
    assert node is not None, "node is missing: install Node.js 20"
    assert (PACKAGE / "node_modules").is_dir(), "run make ts-install (npm ci) first"
    copy = tmp_path / "clients" / "typescript"
    shutil.copytree(PACKAGE / "scripts", copy / "scripts")
    shutil.copytree(PACKAGE / "src" / "generated", copy / "src" / "generated")
    (copy / "node_modules").symlink_to(PACKAGE / "node_modules")
    shutil.copytree(PACKAGE.parents[1] / "schemas", tmp_path / "schemas")

    async def check() -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            node,
            "scripts/generate-types.mjs",
            "--check",
            cwd=copy,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(process.communicate(), 60)
        return process.returncode or 0, out.decode()

    assert await check() == (0, "")
    schema = tmp_path / "schemas" / "candidate.v1.schema.json"
    data = json.loads(schema.read_text(encoding="utf-8"))
    data["properties"]["mood"] = {"type": "string", "title": "Mood"}
    schema.write_text(json.dumps(data, indent=2), encoding="utf-8")
    code, out = await check()
    assert code == 1
    assert "stale: clients/typescript/src/generated/candidate.v1.ts" in out
