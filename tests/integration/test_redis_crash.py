"""A Redis crash with AOF ``everysec`` (SPEC 7.2.1; docs/deployment.md "Redis for memory"):
kill -9 of the redis-server in the middle of traffic, then a restart on its files. Every
turn committed before the kill, every fact and index entry the worker wrote, is there
afterwards; the service (not restarted) carries on by itself: every event answered once,
turns in order, nothing dead-lettered. On a redis-server of the test's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import long_term_store, redis_client
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import (
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
    key_text,
)
from tests.support.conversations import finalized, say_and_end
from tests.support.events import conversation_event, new_id
from tests.support.harness import Received, bot, running_worker, settings_for_test
from tests.support.service_control import private_redis
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


async def _durable_state(settings: Settings, tenant: str, users: list[str]) -> dict[str, list[str]]:
    """Each user's facts and index entries, and every key of theirs."""
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    client = redis_client(settings.redis)
    try:
        ltm = long_term_store(settings, client)
        state: dict[str, list[str]] = {}
        for user in users:
            state[f"{user} facts"] = sorted(f.fact for f in await ltm.facts(tenant, user))
            index = keys.recall_index(tenant, user, "doc")
            state[f"{user} index"] = sorted(key_text(n) for n in await client.hkeys(index))
        return state
    finally:
        await client.aclose()


async def test_a_redis_killed_mid_traffic_keeps_every_committed_turn(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> None:
    with private_redis("--appendonly", "yes", "--appendfsync", "everysec") as server:
        settings = settings_for_test(
            service_urls,
            memory_model.base_url,
            redis_url=server.url,
            redis_durability="require",
            retry_base_seconds=0.2,
            max_attempts=30,
            memory_max_messages=4,
        )
        tenant = new_id("t")
        first = [ConversationKey(tenant, new_id("u"), new_id("c")) for _ in range(3)]
        users = [key.user_id for key in first]
        said: dict[ConversationKey, list[str]] = {}
        async with bot(settings) as (service, client), running_worker(settings):
            for key in first:  # facts and index entries, written by the worker
                said[key] = await say_and_end(client, key, ["my name is Ann", "I speak Thai"])
            for key in first:
                await finalized(service, client, key)
            durable = await _durable_state(settings, tenant, users)
            assert all(durable[f"{user} facts"] for user in users), durable
            assert all(durable[f"{user} index"] for user in users), durable

            memory_model.set_latency(0.3)  # events in the model's hands when Redis dies
            live = [ConversationKey(tenant, user, new_id("c")) for user in users]
            events = {key: [conversation_event(key, f"turn {n}") for n in range(8)] for key in live}
            every_id = [str(e["id"]) for batch in events.values() for e in batch]
            for n in range(8):
                for key in live:
                    await client.publish(events[key][n])
            received: list[Received] = []
            async with asyncio.timeout(60):
                while len(received) < 6:
                    received.append(await client.candidates.get())
            server.kill()  # kill -9, mid-traffic: the answered turns are committed
            await asyncio.sleep(1.0)
            server.start()  # on the same port and files: AOF replayed
            seen = {candidate.body["event_id"] for candidate in received}
            rest = [event_id for event_id in every_id if event_id not in seen]
            received += await collect_candidates(client, rest, within=120, settle=1.0)
            assert client.errors.empty()
            assert await dlq_depth(client) == 0
            retried = service.metrics.registry.get_sample_value(
                "llmbot_events_total", {"outcome": "retried"}
            )
            assert (retried or 0) > 0  # events met the dead Redis, and were retried
        assert_one_candidate_id_per_event(received, every_id)
        for key, ids in [
            *said.items(),
            *((k, [str(e["id"]) for e in v]) for k, v in events.items()),
        ]:
            await assert_memory_turns_exactly_once(settings, key, ids)
        after = await _durable_state(settings, tenant, users)
        for name, before in durable.items():
            assert set(before) <= set(after[name]), name
