"""The memory worker against real RabbitMQ and Redis, with the fake model answering the
summarizer and classifier prompts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.config import Settings
from llm_bot.contract import MemoryJobV1
from llm_bot.fake_model import FakeModelServer, Fault, RecordedRequest
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.idle_sweep import sweep_once
from tests.support.checks import activity_members, key_bytes, key_text
from tests.support.events import conversation_event, message_event, new_id
from tests.support.harness import (
    TEST_KEY_PREFIX,
    Integrator,
    bot,
    running_worker,
    settings_for_test,
)
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


@pytest.fixture
def memory_settings(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> Callable[..., Settings]:
    def factory(**overrides: object) -> Settings:
        values: dict[str, object] = {"memory_max_messages": 4, "retry_base_seconds": 0.05}
        values.update(overrides)
        return settings_for_test(service_urls, memory_model.base_url, **values)

    return factory


async def say(client: Integrator, key: ConversationKey, text: str) -> dict[str, Any]:
    event = message_event(
        tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text=text
    )
    await client.publish(event)
    return (await client.next_candidate()).body


async def settled(client: Integrator, within: float = 60.0) -> None:
    """Wait until the memory queue is empty and stays empty (the worker caught up)."""
    quiet = 0
    async with asyncio.timeout(within):
        while quiet < 5:
            depth = await client.queue_depth(client.settings.memory_queue)
            quiet = quiet + 1 if depth == 0 else 0
            await asyncio.sleep(0.1)


def chat_requests(model: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in model.chat_requests() if schema_name(r) is None]


async def test_forty_turns_compact_into_summary_and_episodes_covering_every_evicted_turn(
    memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """A 40-turn conversation with small bounds ends with a rolling summary and episodic
    items whose provenance covers every turn that left the window; prompts stay bounded."""
    settings = memory_settings()
    key = ConversationKey("tw40", new_id("u"), new_id("c"))
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        await say(client, key, "Hi, my name is Ann and I speak Thai")
        for turn in range(2, 41):
            await say(client, key, f"question number {turn}")
            await settled(client) if turn % 10 == 0 else None
        await settled(client)
        memory = await service.store.working_memory(key)
        episodes = await worker.ltm.episodes(key.tenant_id, key.user_id)
        facts = await worker.ltm.facts(key.tenant_id, key.user_id)
        profile = await worker.ltm.profile(key.tenant_id, key.user_id)
        progress = await worker.progress.load(key)
    assert memory is not None
    window_turns = {m.turn for m in memory.messages}
    assert max(window_turns) == 40
    assert memory.summary
    assert memory.pending_compaction == ()
    covered = sorted(t for episode in episodes for t in episode.turns)
    assert covered == list(range(1, min(window_turns)))  # every evicted turn, exactly once
    assert progress.compacted_through == min(window_turns) - 1
    assert all(e.event_ids for e in episodes)
    assert [f.fact for f in facts] == ["The user's name is Ann."]
    assert facts[0].sources[0].turns[0] == 1
    assert profile["preferred_language"].value == "thai"
    for request in chat_requests(memory_model):
        assert len(request.window()) <= 4


async def test_a_new_conversation_starts_from_long_term_memory(
    memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """After a conversation is finalized, the user's next conversation opens with its
    profile, facts and episode in the memory block of the first turn."""
    settings = memory_settings()
    user = new_id("u")
    first = ConversationKey("tnew", user, new_id("c"))
    async with bot(settings) as (service, client), running_worker(settings):
        await say(client, first, "my name is Ann")
        await say(client, first, "I speak Thai")
        await say(client, first, "I want a refund for order 42")
        await client.publish(
            message_event(
                tenant="tnew",
                user=user,
                conversation=first.conversation_id,
                text=None,
                event_type="conversation.end",
            )
        )
        await settled(client)
        assert await service.store.working_memory(first) is None
        second = ConversationKey("tnew", user, new_id("c"))
        reply = await say(client, second, "hello again")
    request = chat_requests(memory_model)[-1]
    memory = request.memory()
    assert memory is not None
    assert memory["profile"] == ["preferred_language: thai"]
    assert memory["facts"] == ["The user's name is Ann."]
    assert any("(TRANSACTION) I want a refund for order 42" in e for e in memory["episodes"])
    assert all("Ann" not in str(m["content"]) for m in request.messages() if m["role"] == "system")
    assert reply["memory"]["long_term_items"] >= 3


async def test_forget_erases_long_term_memory_of_that_user_only(
    memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """memory.forget removes every key of the user in the tenant, long-term included, and
    leaves another user's and another tenant's memory alone."""
    settings = memory_settings(prefetch=1)  # the "sync" reply comes after the forget's ack
    user, other = new_id("u"), new_id("u")
    keys = [
        ConversationKey("tfg", user, new_id("c")),
        ConversationKey("tfg", other, new_id("c")),
        ConversationKey("tfg2", user, new_id("c")),
    ]
    prefix = settings.redis_key_prefix
    async with bot(settings) as (service, client), running_worker(settings):
        for key in keys:
            await say(client, key, "my name is Bob")
            await client.publish(conversation_event(key, None, event_type="conversation.end"))
        await settled(client)
        before = {key_bytes(k) for k in await service.redis.keys(f"{prefix}:*")}
        mine = {k for k in before if k.startswith(f"{prefix}:{{tfg|{user}}}".encode())}
        assert any(b":ltm:" in k for k in mine)
        await client.publish(
            message_event(
                tenant="tfg", user=user, conversation="*", text=None, event_type="memory.forget"
            )
        )
        await say(client, keys[1], "sync")
        after = {key_bytes(k) for k in await service.redis.keys(f"{prefix}:*")}
        activity = await activity_members(service.redis, prefix)
    assert mine.isdisjoint(after)
    assert (before - mine) <= after
    assert not any(m.startswith(f"tfg|{user}|") for m in activity)


async def test_failed_summarizer_leaves_turns_pending_and_a_retry_compacts_once(
    memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """Junk from the summarizer keeps the turns pending; the retry folds them exactly once,
    and replaying the same job later changes nothing."""
    settings = memory_settings(memory_max_messages=2)
    key = ConversationKey("tsf", new_id("u"), new_id("c"))
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        await say(client, key, "first")
        await settled(client)
        memory_model.script(Fault.status(500), "not json at all")
        await say(client, key, "second")
        await settled(client)
        episodes = await worker.ltm.episodes(key.tenant_id, key.user_id)
        memory = await service.store.working_memory(key)
        assert memory is not None
        assert [e.turns for e in episodes] == [(1,)]
        assert memory.pending_compaction == ()
        replay = MemoryJobV1(
            id="job_replayed",
            kind="turn",
            tenant_id=key.tenant_id,
            user_id=key.user_id,
            conversation_id=key.conversation_id,
            turn=2,
            created_at=datetime.now(UTC),
        )
        await worker.consumer.publish_job(replay)
        await settled(client)
        assert await worker.ltm.episodes(key.tenant_id, key.user_id) == episodes


async def test_idle_conversations_are_finalized_by_the_sweep(
    memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """A conversation idle past the TTL is found in the activity set, finalized once (all
    turns summarized, working memory removed) and leaves the set; active ones stay."""
    settings = memory_settings(redis_key_prefix=f"{TEST_KEY_PREFIX}-sweep")  # own activity set
    idle, active = (ConversationKey("tsw", new_id("u"), new_id("c")) for _ in range(2))
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        await say(client, idle, "my name is Ann")
        await say(client, idle, "I speak Thai")
        await settled(client)
        await asyncio.sleep(1.1)
        await say(client, active, "hello")
        await settled(client)
        now = time.time()
        queued = await sweep_once(
            progress=worker.progress, publish=worker.consumer.publish_job, idle_seconds=1.0, now=now
        )
        await settled(client)
        again = await sweep_once(
            progress=worker.progress, publish=worker.consumer.publish_job, idle_seconds=1.0, now=now
        )
        idle_memory = await service.store.working_memory(idle)
        active_memory = await service.store.working_memory(active)
        progress = await worker.progress.load(idle)
        episodes = await worker.ltm.episodes(idle.tenant_id, idle.user_id)
        members = await activity_members(service.redis, settings.redis_key_prefix)
    assert (queued, again) == (1, 0)
    assert idle_memory is None
    assert active_memory is not None
    assert progress.compacted_through == 2
    assert sorted(t for e in episodes for t in e.turns) == [1, 2]
    assert f"{idle.tenant_id}|{idle.user_id}|{idle.conversation_id}" not in members
    assert f"{active.tenant_id}|{active.user_id}|{active.conversation_id}" in members


@pytest.mark.parametrize("scope", ["user", "other conversation"])
async def test_forget_during_a_compaction(
    scope: str, memory_settings: Callable[..., Settings], memory_model: FakeModelServer
) -> None:
    """A memory.forget lands while a finalize job waits for the summarizer. Its writes are
    refused and it runs again: erased with the user, it finds nothing and only the
    short-lived erasure mark remains; when only another conversation of the user was
    erased, its retry folds its own conversation as usual."""
    settings = memory_settings(prefetch=1)  # the "sync" reply comes after the forget's ack
    user = new_id("u")
    key = ConversationKey("tfr", user, new_id("c"))
    other = ConversationKey("tfr", user, new_id("c"))
    bystander = ConversationKey("tfr", new_id("u"), new_id("c"))
    prefix = settings.redis_key_prefix
    registry = CollectorRegistry()
    async with (
        bot(settings) as (service, client),
        running_worker(settings, registry=registry) as worker,
    ):
        await say(client, key, "my name is Bob and I speak Thai")
        await say(client, other, "a second conversation")
        await settled(client)
        asked = len(memory_model.chat_requests())
        memory_model.script(Fault.delay(1.5))  # the finalize job's summarizer request
        await client.publish(
            message_event(
                tenant="tfr",
                user=user,
                conversation=key.conversation_id,
                text=None,
                event_type="conversation.end",
            )
        )
        async with asyncio.timeout(10):
            while len(memory_model.chat_requests()) == asked:
                await asyncio.sleep(0.02)
        erased = "*" if scope == "user" else other.conversation_id
        await client.publish(
            message_event(
                tenant="tfr", user=user, conversation=erased, text=None, event_type="memory.forget"
            )
        )
        await say(client, bystander, "sync")  # the forget was handled before this reply
        await settled(client)
        async with asyncio.timeout(20):  # the finalize job finishes after its retry
            while registry.get_sample_value("llmbot_events_in_flight"):
                await asyncio.sleep(0.05)
        left = {key_text(k) for k in await service.redis.keys(f"{prefix}:{{tfr|{user}}}:*")}
        activity = await activity_members(service.redis, prefix)
        episodes = await worker.ltm.episodes("tfr", user)
    assert registry.get_sample_value("llmbot_events_total", {"outcome": "retried"})
    if scope == "user":
        assert left <= {f"{prefix}:{{tfr|{user}}}:erasure"}
        assert not any(m.startswith(f"tfr|{user}|") for m in activity)
    else:
        assert [e.conversation_id for e in episodes] == [key.conversation_id]
        assert not any(other.conversation_id in k for k in left)


async def test_events_with_128_character_ids_are_answered_and_their_jobs_done(
    memory_settings: Callable[..., Settings],
) -> None:
    """The longest valid event ids: the message is answered, its turn job and the
    conversation.end's finalize job (ids derived from the event ids) are valid and done,
    nothing is dead-lettered."""
    settings = memory_settings()
    key = ConversationKey("tlongid", new_id("u"), new_id("c"))
    long_ids = [f"{n}" + "e" * 127 for n in range(2)]
    async with bot(settings) as (service, client), running_worker(settings):
        await client.publish(conversation_event(key, "my name is Ann", event_id=long_ids[0]))
        candidate = (await client.next_candidate()).body
        assert candidate["event_id"] == long_ids[0]
        end = conversation_event(key, None, event_id=long_ids[1], event_type="conversation.end")
        await client.publish(end)
        await settled(client)
        assert await service.store.working_memory(key) is None  # finalized
        assert await client.queue_depth(settings.memory_dlq) == 0
        assert await client.queue_depth(settings.dlq) == 0
        assert client.errors.empty()


async def test_a_reply_puts_its_conversation_in_the_sweep_without_any_memory_job(
    make_settings: Callable[..., Settings],
) -> None:
    """The reply's own commit records the conversation's activity (no worker runs, so no
    memory job is handled): a turn whose job is lost is still finalized when it goes idle."""
    settings = make_settings(redis_key_prefix=f"{TEST_KEY_PREFIX}-act")  # own activity set
    key = ConversationKey("tact", new_id("u"), new_id("c"))
    async with bot(settings) as (service, client):
        before = time.time()
        await say(client, key, "remember me")
        member = f"{key.tenant_id}|{key.user_id}|{key.conversation_id}"
        score = (await activity_members(service.redis, settings.redis_key_prefix)).get(member)
    assert score is not None
    assert score >= before - 1
