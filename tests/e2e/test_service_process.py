"""``llm-bot run`` as a real process, driven only through the broker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import message_event, new_id
from tests.support.harness import integrator
from tests.support.processes import CHILD_WITHIN_SECONDS, free_port, settings_env

pytestmark = pytest.mark.e2e


def process_env(settings: Settings) -> dict[str, str]:
    env = settings_env(settings)
    env["OPENAI_API_KEY"] = "sk-test-should-never-be-logged"
    env["LLM_BOT_LOG_FORMAT"] = "json"
    env["LLM_BOT_HTTP_PORT"] = str(free_port())
    return env


async def test_run_answers_an_event_and_stops_cleanly_on_sigterm(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The process answers via the broker, logs JSON without content or secrets, exits 0."""
    settings = make_settings()
    private_text = "my card number is 4111-1111"
    async with integrator(settings) as client:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llm_bot",
            "run",
            env=process_env(settings),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await client.wait_for_consumers(1)
            event = message_event(
                tenant="te2e", user=new_id("u"), conversation=new_id("c"), text=private_text
            )
            await client.publish(event)
            candidate = await client.next_candidate(within=30)
            assert candidate.body["event_id"] == event["id"]
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0
    lines = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    events = {line["event"] for line in lines}
    assert {"consumer.started", "candidate.published", "consumer.stopped"} <= events
    published = next(line for line in lines if line["event"] == "candidate.published")
    assert published["event_id"] == event["id"]
    assert published["tenant_id"] == "te2e"
    assert published["conversation_id"] == event["conversation_id"]
    log_text = stderr.decode()
    assert "4111" not in log_text
    assert "sk-test-should-never-be-logged" not in log_text
    assert "guest:guest" not in log_text


def test_bad_configuration_stops_with_one_line_naming_the_variable() -> None:
    """An invalid value stops the process at start with one clear line."""
    env = dict(os.environ, LLM_BOT_PREFETCH="lots", OPENAI_API_KEY="x")
    import subprocess  # noqa: PLC0415  # only this synchronous test spawns without asyncio

    result = subprocess.run(
        [sys.executable, "-m", "llm_bot", "run"],
        env=env,  # our own interpreter and module
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "LLM_BOT_PREFETCH" in lines[0]


def test_missing_model_endpoint_says_what_to_set() -> None:
    """Without OPENAI_API_KEY or OPENAI_BASE_URL, run says exactly what to set."""
    import subprocess  # noqa: PLC0415  # see above

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    result = subprocess.run(
        [sys.executable, "-m", "llm_bot", "run"],
        env=env,  # our own interpreter and module
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr
    assert "OPENAI_BASE_URL" in result.stderr
