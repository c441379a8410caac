"""The whole product on a Redis Cluster (SPEC 7.2): ``REDIS_URL`` names one node of a
3-master, 3-replica cluster of the tests' own, and nothing else is set.

Replies, the memory worker (compaction into facts, finalization), retrieval, ``memory
show``, ``memory reindex``, erasure by event and by command (every key of the user gone
from every node, every schedule entry gone from every shard), and a primary failover in
the middle of 300 events: each answered once, turns 1..n, nothing dead-lettered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio.cluster import RedisCluster

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import redis_client
from llm_bot.config import Settings
from llm_bot.entrypoints import memory_cli, recall_cli
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import (
    activity_members,
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
)
from tests.support.conversations import finalized
from tests.support.events import conversation_event, message_event, new_id
from tests.support.harness import Integrator, Received, bot, running_worker, settings_for_test
from tests.support.redis_cluster import RedisClusterNodes
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


@pytest.fixture
def cluster_settings(
    service_urls: ServiceUrls, redis_cluster: RedisClusterNodes
) -> Callable[..., Settings]:
    def factory(model: FakeModelServer, **overrides: object) -> Settings:
        values: dict[str, object] = {"redis_url": redis_cluster.url, "retry_base_seconds": 0.05}
        values.update(overrides)
        return settings_for_test(service_urls, model.base_url, **values)

    return factory


async def _turn(client: Integrator, keys: list[ConversationKey], text: str) -> list[str]:
    """``text`` said in every conversation at once; returns the events' ids once each has
    its one candidate."""
    events = [conversation_event(key, text) for key in keys]
    for event in events:
        await client.publish(event)
    ids = [str(event["id"]) for event in events]
    received = await collect_candidates(client, ids, settle=0)
    assert_one_candidate_id_per_event(received, ids)
    return ids


async def test_the_product_works_with_redis_url_on_one_node_of_a_cluster(
    cluster_settings: Callable[..., Settings],
    memory_model: FakeModelServer,
    redis_cluster: RedisClusterNodes,
) -> None:
    settings = cluster_settings(memory_model, memory_max_messages=4)
    prefix, keys_of = settings.redis_key_prefix, RedisKeys(prefix=settings.redis_key_prefix)
    conversations = [ConversationKey("tclu", new_id("u"), new_id("c")) for _ in range(12)]
    said: dict[ConversationKey, list[str]] = {key: [] for key in conversations}
    async with bot(settings) as (service, client), running_worker(settings):
        assert isinstance(service.redis, RedisCluster)
        for text in ("my name is Ann", "I speak Thai", "I want a refund for order 42"):
            for key, event_id in zip(
                conversations, await _turn(client, conversations, text), strict=True
            ):
                said[key].append(event_id)
        for key in conversations:
            assert await assert_memory_turns_exactly_once(settings, key, said[key])
            await client.publish(conversation_event(key, None, event_type="conversation.end"))
        for key in conversations:
            await finalized(service, client, key)
        assert client.errors.empty()
        assert await dlq_depth(client) == 0

        # The users' memory lives on more than one master, and every command reads it.
        homes = {
            redis_cluster.master_of(keys_of.user_scope(key.tenant_id, key.user_id))
            for key in conversations
        }
        assert len(homes) >= 2
        shown = await memory_cli.show_memory(settings, conversations[0])
        assert [f["fact"] for f in shown["long_term"]["facts"]] == ["The user's name is Ann."]
        assert await recall_cli.reindex(
            settings, tenant_id="tclu", user_id=None, rebuild=True, progress=lambda _: None
        )
        hits = await recall_cli.show_recall(settings, conversations[1], "order 42 refund")
        assert any("order 42" in hit["text"] for hit in hits)

        # A new conversation of a user opens with what the first one left.
        again = ConversationKey("tclu", conversations[2].user_id, new_id("c"))
        await _turn(client, [again], "hello again")
        assert "The user's name is Ann." in memory_model.chat_requests()[-1].prompt_text()

        # Erasure, by event and by command, of two users on (likely) different nodes.
        by_event, by_command = conversations[3], conversations[4]
        await client.publish(
            message_event(
                tenant="tclu",
                user=by_event.user_id,
                conversation="*",
                text=None,
                event_type="memory.forget",
            )
        )
        await memory_cli.forget_memory(settings, "tclu", by_command.user_id, "*")
        await _turn(client, [conversations[5]], "sync")  # after the forget's ack
        members = await activity_members(service.redis, prefix)
    for key in (by_event, by_command):
        left = redis_cluster.keys_everywhere(f"{keys_of.user_scope('tclu', key.user_id)}:*")
        assert left <= {keys_of.erasure("tclu", key.user_id)}, left
        assert not any(m.startswith(f"tclu|{key.user_id}|") for m in members)


async def test_a_primary_failover_mid_stream_loses_nothing(
    cluster_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    redis_cluster: RedisClusterNodes,
) -> None:
    """300 events over 30 conversations; the master holding most of them fails over to its
    replica (``CLUSTER FAILOVER``) after the first 100 answers."""
    settings = cluster_settings(fake_model, prefetch=16)
    keys_of = RedisKeys(prefix=settings.redis_key_prefix)
    conversations = [ConversationKey("tfail", new_id("u"), new_id("c")) for _ in range(30)]
    homes = [
        redis_cluster.master_of(keys_of.user_scope(key.tenant_id, key.user_id))
        for key in conversations
    ]
    busiest = max(set(homes), key=homes.count)
    events = {
        key: [conversation_event(key, f"turn {n}") for n in range(10)] for key in conversations
    }
    every_id = [str(event["id"]) for batch in events.values() for event in batch]
    async with bot(settings) as (_, client):
        for n in range(10):
            for key in conversations:
                await client.publish(events[key][n])
        received: list[Received] = []
        async with asyncio.timeout(60):
            while len(received) < 100:
                received.append(await client.candidates.get())
        promoted = await asyncio.to_thread(redis_cluster.failover, busiest)
        seen = {candidate.body["event_id"] for candidate in received}
        rest = [event_id for event_id in every_id if event_id not in seen]
        received += await collect_candidates(client, rest, settle=1.0)
        assert promoted in redis_cluster.masters()
        assert busiest not in redis_cluster.masters()
        assert client.errors.empty()
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, every_id)
    for key in conversations:
        await assert_memory_turns_exactly_once(settings, key, [str(e["id"]) for e in events[key]])


async def test_the_settings_of_every_master_are_read(
    cluster_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    redis_cluster: RedisClusterNodes,
) -> None:
    """Persistence and eviction are read on each of the 3 masters, by its own address
    (the cluster keeps nothing: warned about, the gauge 0 per master)."""
    settings = cluster_settings(fake_model)
    client = redis_client(settings.redis)
    registry = CollectorRegistry()
    try:
        checked = await check_redis_durability(client, settings.redis)
        checked.report(registry=registry)
        nodes = checked.nodes
    finally:
        await client.aclose()
    masters = {f"127.0.0.1:{port}" for port in redis_cluster.masters()}
    assert {node.node for node in nodes} == masters
    assert all(node.eviction_policy == "noeviction" and not node.persists for node in nodes)
    for node in masters:
        assert registry.get_sample_value("llmbot_redis_durable", {"node": node}) == 0.0
