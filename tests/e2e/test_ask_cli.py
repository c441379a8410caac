"""``llm-bot ask`` as a newcomer runs it (a process, no model settings in its environment)
against the service: the reply, the streamed reply, and the ErrorV1 when the model is down."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.scripts import Fault
from tests.support.harness import bot
from tests.support.processes import CHILD_WITHIN_SECONDS, free_port, settings_env

pytestmark = pytest.mark.e2e


async def _ask(settings: Settings, *argv: str) -> tuple[int, str, str]:
    env = {k: v for k, v in settings_env(settings).items() if not k.startswith("OPENAI_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        "ask",
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    return process.returncode or 0, out.decode(), err.decode()


async def test_ask_prints_the_reply_and_streams_it(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    async with bot(settings):
        plain = await _ask(settings, "How much is the blue kettle?", "--user", "u-ask")
        streamed = await _ask(settings, "And the red one?", "--user", "u-ask", "--stream")
        as_json = await _ask(settings, "Thanks", "--user", "u-ask", "--json")
    assert plain == (0, "echo: How much is the blue kettle?\n", "")
    assert streamed == (0, "echo: And the red one?\n", "")
    candidate = json.loads(as_json[1])
    assert (candidate["tenant_id"], candidate["conversation_id"]) == ("store_001", "sess_1")
    assert (candidate["user_id"], candidate["turn"]) == ("u-ask", 3)


async def test_ask_prints_the_error_when_the_model_is_down(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(*[Fault.status(503)] * 2)
    settings = make_settings(max_attempts=2, retry_base_seconds=0.02)
    async with bot(settings):
        code, out, err = await _ask(settings, "hello?", "--user", "u-down")
    assert (code, out) == (1, "")
    assert err.startswith("llm-bot: error model_error: ")


async def test_ask_says_when_nothing_consumes_the_events(
    make_settings: Callable[..., Settings],
) -> None:
    code, out, err = await _ask(make_settings(), "anyone?")
    assert (code, out) == (2, "")
    assert "is llm-bot running" in err


async def test_ask_reports_a_broker_it_cannot_reach_in_one_line(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(amqp_url=f"amqp://guest:guest@127.0.0.1:{free_port()}/")
    code, out, err = await _ask(settings, "anyone?")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1, err  # no library log line before it
    assert err.startswith("llm-bot: RabbitMQ is not reachable")
    assert "AMQP_URL" in err
    assert "guest:" not in err  # credentials never printed
