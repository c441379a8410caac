"""Tool rounds survive a SIGKILL (SPEC 5.9): the replica that published a tool_call
candidate dies; the integrator's tool.result continues the turn in another replica, from
the round kept in Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, ToolCalls
from llm_bot.memory.tool_rounds import prompt_is_well_formed
from tests.support.events import message_event, new_id
from tests.support.harness import integrator
from tests.support.processes import ConsumerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

LOOKUP = {
    "type": "function",
    "function": {"name": "lookup_order", "parameters": {"type": "object"}},
}


async def test_kill_9_between_the_tool_call_and_its_result_loses_nothing(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.script(ToolCalls.of(("lookup_order", "{}"), ids=("call_k9",)), "It is packed.")
    settings = make_settings(lease_seconds=2)
    user, conversation = new_id("u"), new_id("c")
    first = ConsumerProcess(settings, log_path=tmp_path / "first.log")
    second = ConsumerProcess(settings, log_path=tmp_path / "second.log")
    async with integrator(settings) as client:
        try:
            await first.start()
            await first.wait_ready()
            await client.publish(
                message_event(
                    tenant="tk9",
                    user=user,
                    conversation=conversation,
                    text="where is my order?",
                    tools=[LOOKUP],
                )
            )
            call = (await client.next_candidate(within=30)).body
            first.kill()
            await second.start()
            await second.wait_ready()
            result = message_event(
                tenant="tk9",
                user=user,
                conversation=conversation,
                text=None,
                event_type="tool.result",
                tool={"tool_call_id": "call_k9", "name": "lookup_order", "content": "packed"},
            )
            await client.publish(result)
            answer = (await client.next_candidate(within=30)).body
            while answer["id"] == call["id"]:  # killed before its ack: republished, same id
                answer = (await client.next_candidate(within=30)).body
        finally:
            first.kill()
            await second.stop()
    assert call["kind"] == "tool_call"
    assert answer["kind"] == "text"
    assert answer["text"] == "It is packed."
    assert answer["event_id"] == result["id"]
    assert answer["turn"] == call["turn"]
    prompts = [r.messages() for r in fake_model.chat_requests()]
    assert len(prompts) == 2
    assert all(prompt_is_well_formed(p) for p in prompts)
    assert prompts[1][-1] == {"role": "tool", "content": "packed", "tool_call_id": "call_k9"}
