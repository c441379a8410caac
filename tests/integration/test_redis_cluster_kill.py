"""A hard failover on a Redis Cluster of the test's own (issue 42): the master holding most
conversations is killed with -9 mid-stream, no ``CLUSTER FAILOVER``; its replica is promoted
with whatever it had replicated. Every event is still answered once (the broker keeps each
until answered; the fair queue's lost state is admitted again or repaired), none errored,
nothing dead-lettered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import assert_one_candidate_id_per_event, collect_candidates, dlq_depth
from tests.support.events import conversation_event, new_id
from tests.support.harness import Received, bot, settings_for_test
from tests.support.redis_cluster import RedisClusterNodes, redis_cluster
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.fault]


@pytest.fixture
def own_cluster() -> Iterator[RedisClusterNodes]:
    """A cluster of this test's own: the session's shared one is never killed."""
    try:
        with redis_cluster() as nodes:
            yield nodes
    except RuntimeError as exc:
        pytest.fail(f"could not start a Redis Cluster: {exc}", pytrace=False)


async def test_a_master_killed_9_mid_stream_loses_no_event(
    service_urls: ServiceUrls, fake_model: FakeModelServer, own_cluster: RedisClusterNodes
) -> None:
    fake_model.set_latency(0.05)
    settings = settings_for_test(
        service_urls,
        fake_model.base_url,
        redis_url=own_cluster.url,
        prefetch=16,
        lease_seconds=3,
        max_attempts=10,
        retry_base_seconds=0.3,
    )
    keys_of = RedisKeys(prefix=settings.redis_key_prefix)
    conversations = [ConversationKey("tkill", new_id("u"), new_id("c")) for _ in range(30)]
    homes = [
        own_cluster.master_of(keys_of.user_scope(k.tenant_id, k.user_id)) for k in conversations
    ]
    busiest = max(set(homes), key=homes.count)
    events = [conversation_event(key, f"turn {n}") for n in range(10) for key in conversations]
    every_id = [str(event["id"]) for event in events]
    async with bot(settings) as (_, client):
        for event in events:
            await client.publish(event)
        received: list[Received] = []
        async with asyncio.timeout(60):
            while len(received) < 100:
                received.append(await client.candidates.get())
        promoted = await asyncio.to_thread(own_cluster.kill_master, busiest)
        seen = {candidate.body["event_id"] for candidate in received}
        rest = [event_id for event_id in every_id if event_id not in seen]
        received += await collect_candidates(client, rest, within=120, settle=1.0)
        assert promoted in own_cluster.masters()
        assert client.errors.empty(), "an event got an ErrorV1"
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, every_id)
