"""The message path against real RabbitMQ and Redis, with the fake model over HTTP."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.contract.messages import candidate_id
from llm_bot.fake_model import FakeModelServer, Fault
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import message_event, new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration


async def test_one_event_gets_one_candidate_with_model_text_and_matching_ids(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """An event published with plain aio-pika is answered by exactly one CandidateV1."""
    fake_model.script("สินค้านี้ราคา 250 บาทค่ะ")
    event = message_event(
        tenant="store_001", user=new_id("u"), conversation=new_id("c"), text="ราคาสินค้านี้เท่าไหร่ครับ"
    )
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with bot(make_settings()) as (_, client):
        await client.publish(event, headers={"traceparent": traceparent})
        received = await client.next_candidate()
        candidate = received.body
        assert candidate["schema"] == "candidate.v1"
        assert candidate["id"] == candidate_id(
            str(event["tenant_id"]), str(event["user_id"]), str(event["id"])
        )
        assert candidate["event_id"] == event["id"]
        assert (candidate["tenant_id"], candidate["user_id"], candidate["conversation_id"]) == (
            event["tenant_id"],
            event["user_id"],
            event["conversation_id"],
        )
        assert candidate["text"] == "สินค้านี้ราคา 250 บาทค่ะ"
        assert candidate["turn"] == 1
        assert candidate["kind"] == "text"
        assert candidate["status"] == "proposed"
        assert candidate["model"] == "fake-model"
        assert candidate["usage"]["input_tokens"] > 0
        assert candidate["usage"]["output_tokens"] > 0
        assert received.message_id == candidate["id"]
        assert received.correlation_id == event["conversation_id"]
        trace_id = traceparent.split("-")[1]
        assert received.headers["traceparent"].split("-")[1] == trace_id  # the same trace
        assert client.candidates.empty()
        assert len(fake_model.chat_requests()) == 1
        assert await client.ingress_depth() == 0


async def test_turn_three_request_contains_turns_one_and_two(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Memory carries the conversation: the model's request for turn 3 holds turns 1 and 2."""
    tenant, user, conv = "t1", new_id("u"), new_id("c")
    prompts = ["my name is Ann", "I like green tea", "what do you know about me?"]
    async with bot(make_settings(system_prompt="You are a shop assistant.")) as (_, client):
        for text in prompts:
            await client.publish(
                message_event(tenant=tenant, user=user, conversation=conv, text=text)
            )
            await client.next_candidate()
    third = fake_model.chat_requests()[2].messages()
    assert third[0] == {"role": "system", "content": "You are a shop assistant."}
    assert [(m["role"], m["content"]) for m in third[1:]] == [
        ("user", "my name is Ann"),
        ("assistant", "echo: my name is Ann"),
        ("user", "I like green tea"),
        ("assistant", "echo: I like green tea"),
        ("user", "what do you know about me?"),
    ]


async def test_twenty_turns_with_small_bounds_stay_bounded_and_lose_nothing(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """No model request exceeds the window bounds; every evicted turn is in the raw trace."""
    max_messages, max_chars = 4, 160
    settings = make_settings(memory_max_messages=max_messages, memory_max_chars=max_chars)
    key = ConversationKey("t20", new_id("u"), new_id("c"))
    async with bot(settings) as (service, client):
        for turn in range(1, 21):
            await client.publish(
                message_event(
                    tenant=key.tenant_id,
                    user=key.user_id,
                    conversation=key.conversation_id,
                    text=f"turn {turn} says hi",
                )
            )
            received = await client.next_candidate()
            assert received.body["turn"] == turn
        for request in fake_model.chat_requests():
            window = request.window()
            assert len(window) <= max_messages
            assert sum(len(m["content"]) for m in window) <= max_chars
        trace = await service.store.raw_trace(key)
        memory = await service.store.working_memory(key)
    assert memory is not None
    assert [(m.turn, m.role) for m in trace] == [
        (turn, role) for turn in range(1, 21) for role in ("user", "assistant")
    ]
    kept_turns = {m.turn for m in memory.messages}
    evicted = set(range(1, 21)) - kept_turns
    assert set(memory.pending_compaction) == evicted
    assert max(kept_turns) == 20
    assert len(memory.messages) <= max_messages


async def test_responses_api_mode_end_to_end(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """With LLM_BOT_API=responses the Responses API is called with flattened messages."""
    tenant, user, conv = "tr", new_id("u"), new_id("c")
    fake_model.script("first answer", "second answer")
    async with bot(make_settings(api="responses", system_prompt="Be brief.")) as (_, client):
        for text in ("hello there", "and again"):
            await client.publish(
                message_event(tenant=tenant, user=user, conversation=conv, text=text)
            )
        first, second = await client.next_candidate(), await client.next_candidate()
    assert (first.body["text"], second.body["text"]) == ("first answer", "second answer")
    assert fake_model.chat_requests() == []
    requests = fake_model.responses_requests()
    assert len(requests) == 2
    assert requests[1].body["input"] == (
        "(system) Be brief.\n\n(user) hello there\n\n(assistant) first answer\n\n(user) and again"
    )
    assert second.body["usage"]["input_tokens"] > 0


async def test_redelivered_event_is_answered_once_with_the_same_candidate(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Publishing the same event id twice calls the model once and republishes one candidate id."""
    event = message_event(tenant="tdup", user=new_id("u"), conversation=new_id("c"), text="hi")
    async with bot(make_settings()) as (service, client):
        await client.publish(event)
        first = await client.next_candidate()
        await client.publish(event)
        second = await client.next_candidate()
        key = ConversationKey(event["tenant_id"], event["user_id"], event["conversation_id"])
        trace = await service.store.raw_trace(key)
    assert first.body == second.body
    assert len(fake_model.chat_requests()) == 1
    assert len(trace) == 2


async def test_same_event_id_in_two_tenants_gets_two_candidate_ids(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """One event id used by two tenants (same user and conversation ids) is two events: two
    model calls, two candidates with distinct ids (a subscriber deduplicating by id keeps
    both), each id the one a redelivery of that event republishes."""
    user, conversation = new_id("u"), new_id("c")
    first = message_event(tenant="tcid1", user=user, conversation=conversation, text="hi")
    second = {**first, "tenant_id": "tcid2"}
    async with bot(make_settings()) as (_, client):
        await client.publish(first)
        one = await client.next_candidate()
        await client.publish(second)
        two = await client.next_candidate()
        await client.publish(second)
        again = await client.next_candidate()
    assert one.body["event_id"] == two.body["event_id"] == first["id"]
    assert (one.body["tenant_id"], two.body["tenant_id"]) == ("tcid1", "tcid2")
    assert one.body["id"] != two.body["id"]
    assert one.message_id != two.message_id
    assert again.body["id"] == two.body["id"]
    assert len(fake_model.chat_requests()) == 2


async def test_transient_model_failures_are_retried_then_answered(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """429 and 500 are retried with backoff; the event is then answered once."""
    fake_model.script(Fault.status(429), Fault.status(500), "third time lucky")
    event = message_event(tenant="tretry", user=new_id("u"), conversation=new_id("c"), text="hi")
    async with bot(make_settings(retry_base_seconds=0.02)) as (_, client):
        await client.publish(event)
        candidate = await client.next_candidate()
    assert candidate.body["text"] == "third time lucky"
    assert len(fake_model.chat_requests()) == 3
    assert client.errors.empty()


async def test_model_failing_every_attempt_publishes_error_and_dead_letters(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """After LLM_BOT_MAX_ATTEMPTS transient failures: ErrorV1 model_error, dead letter, go on."""
    fake_model.script(*[Fault.status(503)] * 3)
    tenant, user, conv = "tfail", new_id("u"), new_id("c")
    failing = message_event(tenant=tenant, user=user, conversation=conv, text="boom")
    settings = make_settings(max_attempts=3, retry_base_seconds=0.02)
    async with bot(settings) as (_, client):
        await client.publish(failing)
        error = await client.next_error()
        assert error.body["code"] == "model_error"
        assert error.body["event_id"] == failing["id"]
        assert error.body["schema"] == "llmbot.error.v1"
        assert error.body["attempts"] == 3
        [dead] = await client.dead_letters(1)
        assert dead.headers["x-error-code"] == "model_error"
        assert dead.headers["x-attempts"] == 3
        assert dead.message_id == failing["id"]
        await client.publish(
            message_event(tenant=tenant, user=user, conversation=conv, text="still there?")
        )
        candidate = await client.next_candidate()
    assert candidate.body["text"] == "echo: still there?"
    assert candidate.body["turn"] == 1
    assert len(fake_model.chat_requests()) == 4


async def test_model_rejection_is_terminal_at_once(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A 4xx other than 408/409/429 cannot be fixed by retrying: one attempt, then terminal."""
    fake_model.script(Fault.status(400, "bad request"))
    event = message_event(tenant="trej", user=new_id("u"), conversation=new_id("c"), text="x")
    async with bot(make_settings(retry_base_seconds=0.02)) as (_, client):
        await client.publish(event)
        error = await client.next_error()
        [dead] = await client.dead_letters(1)
    assert (error.body["code"], error.body["attempts"]) == ("model_error", 1)
    assert dead.headers["x-attempts"] == 1
    assert len(fake_model.chat_requests()) == 1


async def test_model_timeout_is_retried_with_code_timeout(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A hanging model times out (OPENAI_TIMEOUT_MS); exhausted attempts give code timeout."""
    fake_model.script(Fault.hang(30), Fault.hang(30))
    event = message_event(tenant="tto", user=new_id("u"), conversation=new_id("c"), text="x")
    settings = make_settings(openai_timeout_ms=300, max_attempts=2, retry_base_seconds=0.02)
    async with bot(settings) as (_, client):
        await client.publish(event)
        error = await client.next_error()
    assert (error.body["code"], error.body["attempts"]) == ("timeout", 2)


async def test_events_of_many_conversations_are_all_answered_in_order(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """With prefetch > 1, 5 conversations x 4 turns are all answered with turns in order."""
    fake_model.set_latency(0.05)
    conversations = [new_id("c") for _ in range(5)]
    user = new_id("u")
    async with bot(make_settings(prefetch=16)) as (_, client):
        for turn in range(1, 5):
            for conv in conversations:
                await client.publish(
                    message_event(
                        tenant="tmany", user=user, conversation=conv, text=f"{conv} turn {turn}"
                    )
                )
        received = [await client.next_candidate() for _ in range(20)]
    by_conv: dict[str, list[int]] = {}
    for candidate in received:
        by_conv.setdefault(candidate.body["conversation_id"], []).append(candidate.body["turn"])
        assert candidate.body["text"].endswith(f"turn {candidate.body['turn']}")
    assert by_conv == {conv: [1, 2, 3, 4] for conv in conversations}
