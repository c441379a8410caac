"""Forgetting one conversation is complete (SPEC 5.8): its working memory, raw trace and
processed records go, and so does everything it contributed to long-term memory and the
retrieval index; what other conversations contributed stays. Through the broker
(``memory.forget``) and through the CLI (``llm-bot memory forget --conversation``)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import Service, Worker
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.recall_items import (
    LONG_TERM_PREFIX,
    MESSAGE_PREFIX,
    conversation_of,
    long_term_entry_id,
)
from tests.support.conversations import finalized, say_and_end
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, bot, running_worker, settings_for_test
from tests.support.processes import CHILD_WITHIN_SECONDS
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

TENANT = "tforget"


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


@dataclass
class TwoConversations:
    kept: ConversationKey
    doomed: ConversationKey
    doomed_events: list[str]
    kept_events: list[str]


async def two_conversations(
    service: Service, client: Integrator, worker: Worker
) -> TwoConversations:
    """One user, two finalized conversations: the name is said in both, the diet only in
    the doomed one, the home only in the kept one."""
    user = new_id("u")
    doomed = ConversationKey(TENANT, user, new_id("c"))
    kept = ConversationKey(TENANT, user, new_id("c"))
    doomed_events = await say_and_end(
        client, doomed, ["hello, my name is Ann", "I am vegetarian", "I want a refund please"]
    )
    await finalized(service, client, doomed)
    kept_events = await say_and_end(client, kept, ["my name is Ann", "I live in Bangkok"])
    await finalized(service, client, kept)
    facts = {f.fact: f for f in await worker.ltm.facts(TENANT, user)}
    assert sorted(facts) == [
        "The user is vegetarian.",
        "The user lives in Bangkok.",
        "The user's name is Ann.",
    ]
    sources = {s.conversation_id for s in facts["The user's name is Ann."].sources}
    assert sources == {doomed.conversation_id, kept.conversation_id}
    return TwoConversations(kept, doomed, doomed_events, kept_events)


async def assert_only_the_doomed_conversation_is_gone(
    service: Service, worker: Worker, case: TwoConversations
) -> None:
    redis = service.redis
    names = RedisKeys(prefix=service.settings.redis_key_prefix)
    doomed, kept = case.doomed, case.kept
    for name in names.conversation_keys(doomed):
        assert not await redis.exists(name)
    assert await redis.exists(names.raw_trace(kept))
    for event_id in case.doomed_events:
        assert not await redis.exists(names.processed_event(doomed, event_id))
    for event_id in case.kept_events:
        assert await redis.exists(names.processed_event(kept, event_id))
    facts = {f.fact: f for f in await worker.ltm.facts(TENANT, doomed.user_id)}
    assert sorted(facts) == ["The user lives in Bangkok.", "The user's name is Ann."]
    assert [s.conversation_id for s in facts["The user's name is Ann."].sources] == [
        kept.conversation_id
    ]
    episodes = await worker.ltm.episodes(TENANT, doomed.user_id)
    assert {e.conversation_id for e in episodes} == {kept.conversation_id}
    events = await worker.ltm.events(TENANT, doomed.user_id)
    assert all(e.conversation_id != doomed.conversation_id for e in events)
    bundle = await worker.ltm.bundle(TENANT, doomed.user_id)
    assert sorted(f.fact for f in bundle.facts) == sorted(facts)
    assert {e.conversation_id for e in bundle.episodes} == {kept.conversation_id}
    assert all(e.conversation_id != doomed.conversation_id for e in bundle.events)
    index = worker.base.index
    messages = await index.digests(TENANT, doomed.user_id, MESSAGE_PREFIX)
    assert messages
    assert {conversation_of(entry) for entry in messages} == {kept.conversation_id}
    long_term = set(await index.digests(TENANT, doomed.user_id, LONG_TERM_PREFIX))
    remaining = (
        {long_term_entry_id("facts", f.id) for f in facts.values()}
        | {long_term_entry_id("episodes", e.id) for e in episodes}
        | {long_term_entry_id("events", e.id) for e in events}
    )
    assert long_term == remaining


def settings(service_urls: ServiceUrls, model: FakeModelServer) -> Settings:
    return settings_for_test(service_urls, model.base_url, retry_base_seconds=0.05, prefetch=1)


async def test_memory_forget_of_one_conversation_removes_all_it_left(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    config = settings(service_urls, model)
    async with bot(config) as (service, client), running_worker(config) as worker:
        case = await two_conversations(service, client, worker)
        await client.publish(
            message_event(
                tenant=TENANT,
                user=case.doomed.user_id,
                conversation=case.doomed.conversation_id,
                text=None,
                event_type="memory.forget",
            )
        )
        # Prefetch 1: this reply means the forget before it was handled.
        await client.publish(
            message_event(tenant=TENANT, user=new_id("u"), conversation=new_id("c"), text="sync")
        )
        await client.next_candidate()
        await assert_only_the_doomed_conversation_is_gone(service, worker, case)


async def test_the_cli_forgets_one_conversation_completely(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    config = settings(service_urls, model)
    async with bot(config) as (service, client), running_worker(config) as worker:
        case = await two_conversations(service, client, worker)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_BOT_", "OPENAI_"))}
        env.update(
            REDIS_URL=config.redis_url.get_secret_value(),
            LLM_BOT_REDIS_KEY_PREFIX=config.redis_key_prefix,
            LLM_BOT_LOG_LEVEL="warning",
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llm_bot",
            "memory",
            "forget",
            "--tenant",
            TENANT,
            "--user",
            case.doomed.user_id,
            "--conversation",
            case.doomed.conversation_id,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
        assert process.returncode == 0, err.decode()
        assert out.decode().startswith("erased ")
        await assert_only_the_doomed_conversation_is_gone(service, worker, case)
