"""Tool calls as events (SPEC 5.9) through the broker: the model asks for tools, a
``tool_call`` candidate goes out, the integrator's ``tool.result`` events continue the turn.
Every prompt the fake model receives must be one a provider accepts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_bot.bootstrap import Service
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, RecordedRequest, ToolCalls
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.fake_model.scripts import Reply
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.tool_rounds import prompt_is_well_formed
from tests.support.events import message_event, new_id
from tests.support.harness import (
    Integrator,
    Received,
    bot,
    integrator,
    running_service,
    running_worker,
    settings_for_test,
)
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its number.",
        "parameters": {
            "type": "object",
            "properties": {"order": {"type": "string"}},
            "required": ["order"],
        },
    },
}
TRACK = {"type": "function", "function": {"name": "track_parcel", "parameters": {"type": "object"}}}


class Chat:
    """One conversation of one user, as an integrator drives it."""

    def __init__(self, client: Integrator, tenant: str = "ttool") -> None:
        self.client = client
        self.tenant, self.user, self.conversation = tenant, new_id("u"), new_id("c")

    async def say(self, text: str, tools: list[dict[str, Any]] | None = None) -> Received:
        extra = {"tools": tools} if tools else {}
        await self.client.publish(self._event(text=text, **extra))
        return await self.client.next_candidate()

    async def result(self, call_id: str, content: str, event_id: str | None = None) -> str:
        """Publish the ``tool.result`` of ``call_id``; returns its event id."""
        event = self._event(
            text=None,
            event_type="tool.result",
            event_id=event_id,
            tool={"tool_call_id": call_id, "name": "lookup_order", "content": content},
        )
        await self.client.publish(event)
        return str(event["id"])

    def _event(self, **fields: Any) -> dict[str, Any]:
        return message_event(
            tenant=self.tenant, user=self.user, conversation=self.conversation, **fields
        )


async def _handled(service: Service, events: int, within: float = 10.0) -> None:
    """Wait until the service has handled ``events`` events (acked or settled)."""
    async with asyncio.timeout(within):
        while (
            sum(
                service.metrics.registry.get_sample_value("llmbot_events_total", {"outcome": o})
                or 0.0
                for o in ("ok", "skip", "duplicate", "dead_lettered")
            )
            < events
        ):
            await asyncio.sleep(0.02)


def chat_prompts(model: FakeModelServer) -> list[list[dict[str, Any]]]:
    return [r.messages() for r in model.chat_requests()]


def assert_all_well_formed(model: FakeModelServer) -> None:
    for prompt in chat_prompts(model):
        assert prompt_is_well_formed(prompt), json.dumps(prompt, indent=1)


async def test_one_round_a_tool_call_candidate_then_the_answer(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(
        ToolCalls.of(("lookup_order", '{"order": "4471"}'), ids=("call_a",)),
        "Order 4471 ships tomorrow.",
    )
    async with bot(make_settings()) as (_, client):
        chat = Chat(client)
        first = (await chat.say("where is my order 4471?", tools=[LOOKUP])).body
        assert first["kind"] == "tool_call"
        assert first["tool_calls"] == [
            {"id": "call_a", "name": "lookup_order", "arguments": '{"order": "4471"}'}
        ]
        result_id = await chat.result("call_a", '{"status": "packed", "ships": "tomorrow"}')
        second = (await client.next_candidate()).body
    assert second["kind"] == "text"
    assert second["text"] == "Order 4471 ships tomorrow."
    assert second["tool_calls"] is None
    assert second["event_id"] == result_id
    assert second["turn"] == first["turn"]
    requests = fake_model.chat_requests()
    assert [r.body.get("tools") for r in requests] == [[LOOKUP], [LOOKUP]]
    last = requests[-1].messages()
    assert [m["role"] for m in last[-3:]] == ["user", "assistant", "tool"]
    assert last[-1]["tool_call_id"] == "call_a"
    assert last[-1]["content"] == '{"status": "packed", "ships": "tomorrow"}'
    assert_all_well_formed(fake_model)


async def test_two_parallel_calls_continue_when_both_results_came(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(
        ToolCalls.of(("lookup_order", "{}"), ("track_parcel", "{}"), ids=("c1", "c2")),
        "Both found.",
    )
    async with bot(make_settings()) as (_, client):
        chat = Chat(client)
        first = (await chat.say("order and parcel?", tools=[LOOKUP, TRACK])).body
        assert [c["id"] for c in first["tool_calls"]] == ["c1", "c2"]
        await chat.result("c2", "parcel at the depot")  # out of order: fine
        await chat.result("c1", "order packed")
        second = (await client.next_candidate()).body
        assert client.candidates.empty()
    assert second["text"] == "Both found."
    assert len(fake_model.chat_requests()) == 2  # one model call for the whole round
    last = fake_model.chat_requests()[-1].messages()
    assert [(m["role"], m.get("tool_call_id")) for m in last[-3:]] == [
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
    ]
    assert_all_well_formed(fake_model)


async def test_three_sequential_rounds_and_the_round_bound(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """With LLM_BOT_MAX_TOOL_ROUNDS=2, the model call after the second round offers no
    tools, so the turn ends in text."""
    fake_model.script(
        ToolCalls.of(("lookup_order", "{}"), ids=("r1",)),
        ToolCalls.of(("lookup_order", "{}"), ids=("r2",)),
        "Done after two rounds.",
    )
    async with bot(make_settings(max_tool_rounds=2)) as (_, client):
        chat = Chat(client)
        first = (await chat.say("check twice", tools=[LOOKUP])).body
        await chat.result("r1", "one")
        second = (await client.next_candidate()).body
        await chat.result("r2", "two")
        third = (await client.next_candidate()).body
    assert (first["kind"], second["kind"], third["kind"]) == ("tool_call", "tool_call", "text")
    assert second["tool_calls"][0]["id"] == "r2"
    assert third["text"] == "Done after two rounds."
    offered = [bool(r.body.get("tools")) for r in fake_model.chat_requests()]
    assert offered == [True, True, False]
    assert_all_well_formed(fake_model)


async def test_a_user_message_closes_the_open_calls_first(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(ToolCalls.of(("lookup_order", "{}"), ids=("late",)), "Sure, what else?")
    async with bot(make_settings()) as (_, client):
        chat = Chat(client)
        await chat.say("where is my order?", tools=[LOOKUP])
        reply = (await chat.say("never mind, what colours do you have?")).body
        await chat.result("late", "order packed")  # too late: recorded, nothing more
        await chat.say("thanks")
    assert reply["kind"] == "text"
    prompt = fake_model.chat_requests()[1].messages()
    assert [m["role"] for m in prompt[-3:]] == ["assistant", "tool", "user"]
    closed = json.loads(prompt[-2]["content"])
    assert closed["error"] == "no_result"
    assert "new message" in closed["reason"]  # recorded when the user moved on
    assert len(fake_model.chat_requests()) == 3  # the late result called no model
    assert_all_well_formed(fake_model)


async def test_duplicate_and_unknown_results_call_the_model_once(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A redelivered result republishes the same candidate; another result for an answered
    call, and one for a call nobody made, change nothing."""
    fake_model.script(ToolCalls.of(("lookup_order", "{}"), ids=("once",)), "Answered once.")
    async with bot(make_settings(prefetch=1)) as (service, client):
        chat = Chat(client)
        await chat.say("order?", tools=[LOOKUP])
        result_id = await chat.result("once", "packed")
        answer = await client.next_candidate()
        await chat.result("once", "packed", event_id=result_id)  # redelivered
        again = await client.next_candidate()
        await chat.result("once", "packed again")  # another event, same call
        await chat.result("nobody_called_this", "??")
        tail = await chat.say("ok thanks")
        trace = await service.store.raw_trace(
            ConversationKey(chat.tenant, chat.user, chat.conversation)
        )
    results = [m.tool_call_id for m in trace if m.role == "tool"]
    assert results == ["once", "nobody_called_this"]  # the second "once" changed nothing
    assert again.body["id"] == answer.body["id"]
    assert again.body["text"] == "Answered once."
    assert len(fake_model.chat_requests()) == 3  # tool call, answer, "ok thanks"
    last = tail.body
    assert last["kind"] == "text"
    prompt = fake_model.chat_requests()[-1].messages()
    assert sum(1 for m in prompt if m.get("tool_call_id") == "once") == 1
    assert not any(m.get("tool_call_id") == "nobody_called_this" for m in prompt)
    assert_all_well_formed(fake_model)


async def test_the_responses_api_path(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(ToolCalls.of(("lookup_order", '{"order": "1"}'), ids=("fc1",)), "Shipped.")
    async with bot(make_settings(api="responses")) as (_, client):
        chat = Chat(client)
        first = (await chat.say("order 1?", tools=[LOOKUP])).body
        await chat.result("fc1", "shipped yesterday")
        second = (await client.next_candidate()).body
    assert first["tool_calls"] == [
        {"id": "fc1", "name": "lookup_order", "arguments": '{"order": "1"}'}
    ]
    assert second["text"] == "Shipped."
    requests = fake_model.responses_requests()
    assert requests[0].body["tools"][0]["name"] == "lookup_order"  # the flat shape
    items = requests[1].body["input"]
    kinds = [item.get("type") for item in items]
    assert kinds[-2:] == ["function_call", "function_call_output"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "fc1",
        "output": "shipped yesterday",
    }


def tools_then_text(request: RecordedRequest) -> Reply:
    """Replies asking for two tools while none were answered, then text; the memory
    worker's requests get the memory responder's answers."""
    if schema_name(request) is not None:
        return memory_responder(request)
    if any(m.get("role") == "tool" for m in request.messages()):
        return "One answer came, the other did not."
    if request.body.get("tools"):
        return ToolCalls.of(("lookup_order", "{}"), ("track_parcel", "{}"), ids=("fast", "slow"))
    return "You are welcome."


async def test_a_timeout_closes_missing_results_after_a_restart(
    service_urls: ServiceUrls,
) -> None:
    """The service that published the tool_call candidate stops; the worker's sweep, timed
    by the schedule in Redis, closes the missing result; a new service process continues the
    turn; the real result, arriving late, changes nothing."""
    async with FakeModelServer(responder=tools_then_text) as model:
        settings = settings_for_test(
            service_urls, model.base_url, tool_result_timeout_seconds=1, retry_base_seconds=0.05
        )
        async with integrator(settings) as client, running_worker(settings) as worker:
            chat = Chat(client)
            async with running_service(settings) as first:
                await chat.say("order and parcel?", tools=[LOOKUP, TRACK])
                await chat.result("fast", "packed")
                await _handled(first, 2)  # recorded before this process stops
            async with running_service(settings):
                assert await worker.tool_timeouts.run_once(time.time()) == 0  # not due yet
                closed = await worker.tool_timeouts.run_once(time.time() + 2)
                answer = (await client.next_candidate()).body
                assert await worker.tool_timeouts.run_once(time.time() + 4) == 0  # done
                await chat.result("slow", "at the depot")  # late
                await chat.say("thanks")
        replies = [r for r in model.chat_requests() if schema_name(r) is None]
        for request in replies:
            assert prompt_is_well_formed(request.messages())
    assert closed == 1
    assert answer["text"] == "One answer came, the other did not."
    assert answer["event_id"].startswith("tool_timeout_")
    slow = next(m for m in replies[1].messages() if m.get("tool_call_id") == "slow")
    assert "in time" in json.loads(slow["content"])["reason"]
    assert len(replies) == 3  # the late result called no model


async def test_three_sequential_rounds_within_the_default_bound(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(
        *(ToolCalls.of(("lookup_order", f'{{"step": {n}}}'), ids=(f"s{n}",)) for n in (1, 2, 3)),
        "Three lookups later: shipped.",
    )
    async with bot(make_settings()) as (_, client):
        chat = Chat(client)
        candidates = [(await chat.say("trace it", tools=[LOOKUP])).body]
        for n in (1, 2, 3):
            await chat.result(f"s{n}", f"hop {n}")
            candidates.append((await client.next_candidate()).body)
    assert [c["kind"] for c in candidates] == ["tool_call"] * 3 + ["text"]
    assert candidates[-1]["text"] == "Three lookups later: shipped."
    assert len({c["turn"] for c in candidates}) == 1
    assert len({c["id"] for c in candidates}) == 4
    assert [bool(r.body.get("tools")) for r in fake_model.chat_requests()] == [True] * 4
    last = fake_model.chat_requests()[-1].messages()
    assert [m.get("tool_call_id") for m in last if m["role"] == "tool"] == ["s1", "s2", "s3"]
    assert_all_well_formed(fake_model)


async def test_configured_tools_are_offered_when_the_event_has_none(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([TRACK]), encoding="utf-8")
    async with bot(make_settings(tools_path=str(path))) as (_, client):
        chat = Chat(client)
        await chat.say("parcel?")
        await chat.say("order?", tools=[LOOKUP])
    offered = [r.body.get("tools") for r in fake_model.chat_requests()]
    assert offered == [[TRACK], [LOOKUP]]
