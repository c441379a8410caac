"""Durable flows through the broker (SPEC 5.10): a message naming a flow persona starts the
questionnaire, the conversation's next messages answer it, and its FlowResultV1 is
published once on completion, exit or expiry; the checkpoint is then gone."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import Settings
from llm_bot.entrypoints.memory_cli import render_memory, show_memory
from llm_bot.fake_model import FakeModelServer
from llm_bot.flows.flow_graph import REDEFINED_TEXT
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.handler import Delivery
from llm_bot.service.outcomes import Replied
from tests.support.events import conversation_event, encode, message_event, new_id
from tests.support.gateway import gateway_settings, running_gateway, sdk_client
from tests.support.harness import (
    TEST_KEY_PREFIX,
    Integrator,
    bot,
    integrator,
    running_service,
    running_worker,
)

pytestmark = pytest.mark.integration

PERSONAS = """
default: companion
personas:
  companion:
    system_prompt: You are a warm companion.
  checkin:
    flow: checkin
  survey:
    flow: survey
flows:
  checkin:
    intro: Time for your check-in.
    questions:
      - id: mood
        type: scale
        text: How are you feeling today, from 1 to 10?
        retries: 1
        follow_ups:
          - text: What is weighing on you?
            when: {at_most: 4}
      - id: slept
        type: boolean
        text: Did you sleep well?
      - id: drink
        type: choice
        text: What will you drink?
        options: [coffee, tea, water]
    completed_text: Thanks, check-in done.
    exited_text: Okay, stopping here.
  survey:
    questions:
      - id: rating
        type: scale
        text: How would you rate us, from 1 to 10?
"""


@pytest.fixture
def personas_file(tmp_path: Path) -> Path:
    path = tmp_path / "personas.yaml"
    path.write_text(PERSONAS, encoding="utf-8")
    return path


def own_keys() -> str:
    """A Redis key prefix of the test's own: the flow expiry schedule is one sorted set per
    prefix, and a test that sweeps it must not find (and expire) other tests' flows."""
    return f"{TEST_KEY_PREFIX}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def flow_settings(make_settings: Callable[..., Settings], personas_file: Path) -> Settings:
    return make_settings(
        personas_path=str(personas_file), flow_ttl_seconds=60, redis_key_prefix=own_keys()
    )


class Chat:
    """One user's conversation, through the integrator."""

    def __init__(self, client: Integrator, user: str, conversation: str) -> None:
        self.client = client
        self.key = ConversationKey("tf", user, conversation)

    async def say(self, text: str, **metadata: str) -> dict[str, Any]:
        await self.client.publish(conversation_event(self.key, text, metadata=metadata))
        return (await self.client.next_candidate()).body


def _answers(result: dict[str, Any]) -> list[tuple[str, object, int]]:
    return [(a["question_id"], a["value"], a["attempts"]) for a in result["answers"]]


async def _flow_key_exists(settings: Settings, key: ConversationKey) -> bool:
    client = aioredis.from_url(settings.redis_url.get_secret_value())
    try:
        return bool(await client.exists(RedisKeys(prefix=settings.redis_key_prefix).flow(key)))
    finally:
        await client.aclose()


async def test_a_full_questionnaire_with_a_follow_up_then_chat_again(
    flow_settings: Settings, fake_model: FakeModelServer
) -> None:
    async with bot(flow_settings) as (service, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        opened = await chat.say("hi", persona="checkin")
        asked = [opened["text"]]
        for reply in ("three", "work is stressful", "yes", "tea please"):
            asked.append((await chat.say(reply))["text"])
        results = await client.flow_results(1)
        after = await chat.say("what did I say I'd drink?")
        memory = await service.store.raw_trace(chat.key)
    assert asked == [
        "Time for your check-in. How are you feeling today, from 1 to 10?",
        "What is weighing on you?",
        "Did you sleep well?",
        "What will you drink? (coffee, tea or water)",
        "Thanks, check-in done.",
    ]
    assert opened["model"] == "flow:checkin"
    assert opened["usage"]["input_tokens"] == 0
    (result,) = results
    assert result["schema"] == "flow.result.v1"
    assert result["status"] == "completed"
    assert result["flow"] == "checkin"
    assert result["conversation_id"] == chat.key.conversation_id
    assert _answers(result) == [
        ("mood", 3, 1),
        ("mood.follow_up_1", "work is stressful", 1),
        ("slept", True, 1),
        ("drink", "tea", 1),
    ]
    assert [a["raw"] for a in result["answers"]] == [
        "three",
        "work is stressful",
        "yes",
        "tea please",
    ]
    # Flow turns used no model; the conversation then goes back to its chat persona, and
    # the model sees the flow's turns like any others.
    (request,) = fake_model.chat_requests()
    assert request.messages()[0]["content"] == "You are a warm companion."
    prompt = " ".join(str(m["content"]) for m in request.messages())
    assert "What will you drink? (coffee, tea or water)" in prompt
    assert "tea please" in prompt
    assert after["model"] == "fake-model"
    assert [m.content for m in memory if m.role == "user"][:2] == ["hi", "three"]
    assert not await _flow_key_exists(flow_settings, chat.key)


async def test_an_invalid_answer_is_asked_again_then_recorded_missing(
    flow_settings: Settings,
) -> None:
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="checkin")
        again = await chat.say("purple")
        moved_on = await chat.say("banana")  # retries: 1, so this was the last try
        await chat.say("no")
        await chat.say("2")  # "water", by its number
        (result,) = await client.flow_results(1)
    assert again["text"].startswith("Sorry, I didn't catch that. How are you feeling")
    assert "number from 1 to 10" in again["text"]
    assert moved_on["text"] == "Did you sleep well?"
    assert _answers(result) == [("mood", None, 2), ("slept", False, 1), ("drink", "tea", 1)]
    assert result["answers"][0]["raw"] == "banana"


async def test_an_exit_midway_ends_the_flow_with_what_was_answered(
    flow_settings: Settings,
) -> None:
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="checkin")
        await chat.say("8")
        stopped = await chat.say("ไม่ทำแล้ว")
        (result,) = await client.flow_results(1)
    assert stopped["text"] == "Okay, stopping here."
    assert result["status"] == "exited"
    assert _answers(result) == [("mood", 8, 1), ("slept", None, 0), ("drink", None, 0)]


async def test_an_ambiguous_answer_is_read_by_the_model_structured_output(
    flow_settings: Settings, fake_model: FakeModelServer
) -> None:
    fake_model.script('{"value": 7}')
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="survey")
        done = await chat.say("between 6 and 8, so 7 I guess")
        (result,) = await client.flow_results(1)
    (request,) = fake_model.chat_requests()
    assert request.body["response_format"]["json_schema"]["name"] == "flow_answer"
    assert "between 6 and 8" in str(request.messages()[-1]["content"])
    assert done["text"] == "Thank you, that's everything I wanted to ask."
    assert _answers(result) == [("rating", 7, 1)]


async def test_two_conversations_of_one_user_run_different_flows(
    flow_settings: Settings,
) -> None:
    user = new_id("u")
    async with bot(flow_settings) as (_, client):
        one, two = Chat(client, user, new_id("c")), Chat(client, user, new_id("c"))
        await one.say("hi", persona="checkin")
        rate = await two.say("hi", persona="survey")
        await one.say("9")
        await two.say("10")
        survey = await client.flow_results(1)
        await one.say("yes")
        await one.say("coffee")
        checkin = await client.flow_results(1)
    assert rate["text"] == "How would you rate us, from 1 to 10?"
    assert [(r["flow"], r["conversation_id"]) for r in survey] == [
        ("survey", two.key.conversation_id)
    ]
    assert _answers(survey[0]) == [("rating", 10, 1)]
    assert [(r["flow"], r["conversation_id"]) for r in checkin] == [
        ("checkin", one.key.conversation_id)
    ]
    assert _answers(checkin[0]) == [("mood", 9, 1), ("slept", True, 1), ("drink", "coffee", 1)]


async def test_a_republished_last_answer_ends_the_flow_once(flow_settings: Settings) -> None:
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="survey")
        answer = conversation_event(chat.key, "6")
        await client.publish(answer)
        first = (await client.next_candidate()).body
        async with asyncio.timeout(5):  # its result is confirmed, then the checkpoint goes
            while await _flow_key_exists(flow_settings, chat.key):
                await asyncio.sleep(0.02)
        await client.publish(answer)  # the same event again, later
        second = (await client.next_candidate()).body
        results = await client.flow_results(1, settle=1.0)
    assert first == second  # the stored candidate, republished
    assert len(results) == 1  # the result went out before its checkpoint: not again


async def test_a_crash_between_the_commit_and_the_publish_republishes_the_result(
    flow_settings: Settings,
) -> None:
    async with bot(flow_settings) as (service, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="survey")
        last = conversation_event(chat.key, "8")
        # Handled, committed, then "the process died": nothing was published or acked.
        outcome = await service.handler.handle(Delivery(body=encode(last)))
        assert isinstance(outcome, Replied)
        assert outcome.flow_result is not None
        assert await _flow_key_exists(flow_settings, chat.key)
        await client.publish(last)  # the broker redelivers it
        replayed = (await client.next_candidate()).body
        results = await client.flow_results(1, settle=1.0)
    assert replayed["text"] == "Thank you, that's everything I wanted to ask."
    assert [r["id"] for r in results] == [outcome.flow_result.id]
    assert _answers(results[0]) == [("rating", 8, 1)]
    assert not await _flow_key_exists(flow_settings, chat.key)


async def test_a_flow_nobody_answers_expires_through_the_worker_sweep(
    flow_settings: Settings,
) -> None:
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="checkin")
        await chat.say("5")
        shown = await show_memory(flow_settings, chat.key)  # llm-bot memory show
        async with running_worker(flow_settings) as worker:
            assert worker.flow_expiry is not None
            assert await worker.flow_expiry.run_once(time.time()) == 0  # not yet due
            expired = await worker.flow_expiry.run_once(time.time() + 61)
            again = await worker.flow_expiry.run_once(time.time() + 61)
        (result,) = await client.flow_results(1)
        after = await chat.say("hello again")
    assert shown["flow"]["status"] == "running"
    assert shown["flow"]["prompt"] == "Did you sleep well?"
    assert [a["value"] for a in shown["flow"]["answers"]] == [5]
    assert "flow: checkin (running)" in render_memory(shown)
    assert (await show_memory(flow_settings, chat.key))["flow"] is None  # expired: gone
    assert (expired, again) == (1, 0)
    assert result["status"] == "expired"
    assert _answers(result) == [("mood", 5, 1), ("slept", None, 0), ("drink", None, 0)]
    assert after["model"] == "fake-model"  # the flow is over: back to the chat
    assert not await _flow_key_exists(flow_settings, chat.key)


async def test_forgetting_the_user_during_a_flow_erases_it(
    make_settings: Callable[..., Settings], personas_file: Path
) -> None:
    # Prefetch 1: the reply after the forget means the forget was handled.
    flow_settings = make_settings(personas_path=str(personas_file), prefetch=1)
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="checkin")
        await chat.say("4")
        assert await _flow_key_exists(flow_settings, chat.key)
        await client.publish(
            message_event(
                tenant="tf",
                user=chat.key.user_id,
                conversation="*",
                text=None,
                event_type="memory.forget",
            )
        )
        after = await chat.say("hello")
        results = await client.flow_results(0, within=0.5)
    assert not await _flow_key_exists(flow_settings, chat.key)
    assert after["model"] == "fake-model"  # no flow left to answer
    assert results == []  # an erased flow reports nothing


async def test_flow_turns_have_node_spans_and_count_their_endings(flow_settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    async with bot(flow_settings, tracer_provider=provider, registry=registry) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="survey")
        exporter.clear()
        await chat.say("5")
        spans = {span.name for span in exporter.get_finished_spans()}
        exporter.clear()
        await chat.say("hello")  # a chat message after the flow
        later = {span.name for span in exporter.get_finished_spans()}
    assert {"supervisor", "recall", "flow", "build_candidate", "remember"} <= spans
    assert not any(name.startswith("chat ") for name in spans)  # no model call
    assert {"supervisor", "recall", "call_model", "build_candidate", "remember"} <= later
    completed = registry.get_sample_value("llmbot_flow_results_total", {"status": "completed"})
    assert completed == 1


async def test_forgetting_one_conversation_ends_its_flow_not_the_other(
    make_settings: Callable[..., Settings], personas_file: Path
) -> None:
    flow_settings = make_settings(personas_path=str(personas_file), prefetch=1)
    user = new_id("u")
    async with bot(flow_settings) as (_, client):
        gone, kept = Chat(client, user, new_id("c")), Chat(client, user, new_id("c"))
        await gone.say("hi", persona="survey")
        await kept.say("hi", persona="survey")
        await client.publish(conversation_event(gone.key, None, type="memory.forget"))
        await kept.say("7")
        (result,) = await client.flow_results(1)
        after = await gone.say("hello")
    assert result["conversation_id"] == kept.key.conversation_id
    assert after["model"] == "fake-model"
    assert not await _flow_key_exists(flow_settings, gone.key)


async def test_a_flow_through_the_openai_compatible_gateway(
    make_settings: Callable[..., Settings], personas_file: Path
) -> None:
    """A voice platform's custom-LLM hook runs the questionnaire: each streamed reply is
    the next question, and the result is published as for any flow."""
    settings = gateway_settings(make_settings, personas_path=str(personas_file))
    user, conversation = new_id("u"), new_id("c")
    async with bot(settings) as (_, client), running_gateway(settings) as gateway:
        sdk = sdk_client(gateway)
        said: list[str] = []
        for text, persona in (("hello", "survey"), ("nine", None)):
            metadata = {"conversation_id": conversation}
            if persona:
                metadata["persona"] = persona
            stream = await sdk.chat.completions.create(
                model="llm-bot",
                messages=[{"role": "user", "content": text}],
                user=user,
                metadata=metadata,
                stream=True,
            )
            pieces = [c.choices[0].delta.content async for c in stream if c.choices]
            said.append("".join(p for p in pieces if p))
        await sdk.close()
        (result,) = await client.flow_results(1)
    assert said == [
        "How would you rate us, from 1 to 10?",
        "Thank you, that's everything I wanted to ask.",
    ]
    assert _answers(result) == [("rating", 9, 1)]


async def test_answers_arriving_together_are_applied_in_order(flow_settings: Settings) -> None:
    async with bot(flow_settings) as (_, client):
        chat = Chat(client, new_id("u"), new_id("c"))
        await chat.say("hi", persona="checkin")
        answers = [conversation_event(chat.key, text) for text in ("8", "yes", "water")]
        for event in answers:  # no wait between them: one prefetch window, one lock
            await client.publish(event)
        replies = {}
        for _ in answers:
            body = (await client.next_candidate()).body
            replies[body["event_id"]] = body["text"]
        (result,) = await client.flow_results(1)
    assert [replies[str(e["id"])] for e in answers] == [
        "Did you sleep well?",
        "What will you drink? (coffee, tea or water)",
        "Thanks, check-in done.",
    ]
    assert _answers(result) == [("mood", 8, 1), ("slept", True, 1), ("drink", "water", 1)]


async def test_a_flow_redefined_while_running_continues_or_ends_cleanly(
    flow_settings: Settings, tmp_path: Path
) -> None:
    """The personas file changes between two deployments: a running flow goes on at the
    question it waited on (wherever it moved); one whose question is gone ends (exited)
    with what was answered, instead of failing every message."""
    moved = PERSONAS.replace(
        "    questions:\n      - id: mood",
        "    questions:\n      - {id: name, type: text, text: Your name}\n      - id: mood",
        1,
    )
    gone = PERSONAS.replace("id: slept", "id: rested").replace("id: rating", "id: score")
    moved_file, gone_file = tmp_path / "moved.yaml", tmp_path / "gone.yaml"
    moved_file.write_text(moved, encoding="utf-8")
    gone_file.write_text(gone, encoding="utf-8")
    user = new_id("u")
    async with bot(flow_settings) as (_, client):
        kept, ended = Chat(client, user, new_id("c")), Chat(client, user, new_id("c"))
        await kept.say("hi", persona="checkin")
        await ended.say("hi", persona="checkin")
        await ended.say("7")  # now waiting on "slept"
    redeployed = flow_settings.model_copy(update={"personas_path": moved_file})
    async with integrator(redeployed) as client, running_service(redeployed):
        kept.client = client
        assert (await kept.say("6"))["text"] == "Did you sleep well?"
    redeployed = flow_settings.model_copy(update={"personas_path": gone_file})
    async with integrator(redeployed) as client, running_service(redeployed):
        ended.client = client
        stopped = await ended.say("yes")
        (result,) = await client.flow_results(1)
    assert stopped["text"] == REDEFINED_TEXT
    assert result["status"] == "exited"
    assert _answers(result) == [("mood", 7, 1), ("rested", None, 0), ("drink", None, 0)]
