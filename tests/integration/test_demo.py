"""``llm-bot demo`` end to end (RabbitMQ, Redis, the fake model): every turn answered, the
tool round answered by the demo over the bus, and the demo user erased afterwards."""

from __future__ import annotations

import pytest

from llm_bot.entrypoints.demo import DEMO_PROMPTS, run_demo
from tests.support.harness import settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


async def test_the_demo_runs_its_conversation_and_a_tool_round(
    service_urls: ServiceUrls, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for_test(service_urls, "http://127.0.0.1:9/v1", log_level="warning")
    await run_demo(settings)
    out = capsys.readouterr().out
    for turn, text in enumerate(DEMO_PROMPTS, start=1):
        assert f"turn {turn}  user: {text}" in out
    assert out.count("        bot:  ") == len(DEMO_PROMPTS)
    assert 'bot asks for a tool: lookup_order({"order": "3921"})' in out
    assert "The order lookup says:" in out
    assert "replacement teapot lid" in out
    assert "(the demo user's memory was erased again:" in out
    # The check-in questionnaire ran to its end and its result was printed.
    assert "bot:  Time for your short daily check-in. How are you feeling today" in out
    assert "bot:  Thank you, that's the check-in done. Have a good day!" in out
    assert '"schema": "flow.result.v1"' in out
    assert '"status": "completed"' in out
    assert '"value": 6' in out
    assert '"value": "tea"' in out
