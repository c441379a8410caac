"""The service on a 3-node RabbitMQ cluster (SPEC 7.2): ``AMQP_URL`` lists the three nodes
of a cluster of the tests' own, and the node the service is connected to is killed with
SIGKILL in the middle of 300 events.

The service reconnects to another node by itself, re-declares its topology and consumes
again; the quorum ingress queue kept every event, the ones in flight on the lost node are
redelivered and deduplicated: each event answered with one candidate id, every
conversation's turns 1..n in the order published, nothing dead-lettered.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import (
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
)
from tests.support.events import conversation_event, new_id
from tests.support.harness import Received, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.rabbit_cluster import RabbitClusterNodes
from tests.support.services import ServiceUrls

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.fault,
    pytest.mark.cluster,
    pytest.mark.timeout(420),  # the first cluster test also builds the cluster (about 20 s)
]

BACK_WITHIN_SECONDS = 15.0
"""The longest the consumer may go without a broker after its node is lost."""


async def back_on_another_node(
    process: ConsumerProcess, cluster: RabbitClusterNodes, name: str, lost_port: int
) -> float:
    """Seconds until the process's ``/readyz`` answers 200 again after its node was
    killed (it turns 503 the moment the connection drops), and its connection is on a
    surviving node."""
    started = time.monotonic()
    async with asyncio.timeout(BACK_WITHIN_SECONDS):
        while await process.readyz() != 200:
            await asyncio.sleep(0.05)
    back_after = time.monotonic() - started
    node = await asyncio.to_thread(cluster.node_of_connection, name)
    assert node.port != lost_port
    return back_after


async def test_kill_9_of_the_connected_node_mid_stream_loses_nothing(
    service_urls: ServiceUrls,
    rabbit_cluster: RabbitClusterNodes,
    fake_model: FakeModelServer,
    tmp_path: Path,
) -> None:
    """300 events over 30 conversations; after the first 60 answers the node the service
    is connected to is killed: every event answered once, in order, none dead-lettered,
    the consumer back within 15 s."""
    fake_model.set_latency(0.02)
    urls = ServiceUrls(rabbit_cluster.url, service_urls.redis_url)
    settings = settings_for_test(urls, fake_model.base_url, prefetch=16, lease_seconds=2)
    connection_name = f"llm-bot {settings.ingress_queue}"
    conversations = [ConversationKey("trmq", new_id("u"), new_id("c")) for _ in range(30)]
    events = {
        key: [conversation_event(key, f"turn {n}") for n in range(10)] for key in conversations
    }
    every_id = [str(event["id"]) for batch in events.values() for event in batch]
    process = ConsumerProcess(settings, log_path=tmp_path / "consumer.log")
    try:
        await process.start()
        await process.wait_ready()
        serving = await asyncio.to_thread(rabbit_cluster.node_of_connection, connection_name)
        other = next(node for node in rabbit_cluster.nodes if node is not serving)
        integrator_settings = settings.model_copy(update={"amqp_url": SecretStr(other.url)})
        async with integrator(integrator_settings) as client:
            for n in range(10):
                for key in conversations:
                    await client.publish(events[key][n])
            received: list[Received] = []
            async with asyncio.timeout(60):
                while len(received) < 60:
                    received.append(await client.candidates.get())
            await asyncio.to_thread(rabbit_cluster.kill, serving)
            try:
                back_after = await back_on_another_node(
                    process, rabbit_cluster, connection_name, serving.port
                )
                seen = {candidate.body["event_id"] for candidate in received}
                rest = [event_id for event_id in every_id if event_id not in seen]
                received += await collect_candidates(client, rest, within=90, settle=1.5)
                assert client.errors.empty()
                assert await dlq_depth(client) == 0
            finally:
                await asyncio.to_thread(rabbit_cluster.restart, serving)
    finally:
        await process.stop()
    print(f"consumer back {back_after:.2f} s after its node was killed")  # a figure for the report
    assert back_after <= BACK_WITHIN_SECONDS
    assert_one_candidate_id_per_event(received, every_id)
    for key in conversations:
        ids = [str(event["id"]) for event in events[key]]
        assert await assert_memory_turns_exactly_once(settings, key, ids) == ids


async def test_kill_9_of_a_node_while_partitions_are_in_use_keeps_order_and_loses_nothing(
    service_urls: ServiceUrls,
    rabbit_cluster: RabbitClusterNodes,
    fake_model: FakeModelServer,
    tmp_path: Path,
) -> None:
    """Three ingress partitions (quorum queues, leaders spread over the nodes) behind the
    consistent-hash exchange, two replicas; 20 conversations x 10 messages, each
    conversation's back to back; after 50 answers the node the first replica is connected
    to is killed -9: every event answered with one candidate id, every conversation
    remembered in publish order, nothing dead-lettered."""
    fake_model.set_latency(0.02)
    urls = ServiceUrls(rabbit_cluster.url, service_urls.redis_url)
    settings = settings_for_test(
        urls, fake_model.base_url, prefetch=8, lease_seconds=2, ingress_partitions=3
    )
    connection_name = f"llm-bot {settings.ingress_queue}"
    conversations = [ConversationKey("trmqp", new_id("u"), new_id("c")) for _ in range(20)]
    events = {
        key: [conversation_event(key, f"turn {n}") for n in range(10)] for key in conversations
    }
    every_id = [str(event["id"]) for batch in events.values() for event in batch]
    first = ConsumerProcess(settings, log_path=tmp_path / "first.log")
    second = ConsumerProcess(settings, log_path=tmp_path / "second.log")
    try:
        await first.start()
        await first.wait_ready()  # first: the partitions' active consumer
        # its node, asked while it is the only connection of that name
        serving = await asyncio.to_thread(rabbit_cluster.node_of_connection, connection_name)
        await second.start()
        await second.wait_ready()
        other = next(node for node in rabbit_cluster.nodes if node is not serving)
        integrator_settings = settings.model_copy(update={"amqp_url": SecretStr(other.url)})
        async with integrator(integrator_settings) as client:
            for key in conversations:
                for event in events[key]:
                    await client.publish(event)
            received: list[Received] = []
            async with asyncio.timeout(90):
                while len(received) < 50:
                    received.append(await client.candidates.get())
            await asyncio.to_thread(rabbit_cluster.kill, serving)
            try:
                seen = {candidate.body["event_id"] for candidate in received}
                rest = [event_id for event_id in every_id if event_id not in seen]
                received += await collect_candidates(client, rest, within=120, settle=2.0)
                assert client.errors.empty()
                assert await dlq_depth(client) == 0
            finally:
                await asyncio.to_thread(rabbit_cluster.restart, serving)
    finally:
        await asyncio.gather(first.stop(), second.stop())
    assert_one_candidate_id_per_event(received, every_id)
    for key in conversations:
        ids = [str(event["id"]) for event in events[key]]
        assert await assert_memory_turns_exactly_once(settings, key, ids) == ids
