"""Ingress partitions and the upgrade from the single queue (SPEC 4; issue 42): nothing
queued in an ingress queue of another layout is lost, and a queue a release before
partitions declared (no single active consumer) is still consumed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aio_pika
import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.e2e.test_faults import own
from tests.support.checks import assert_one_candidate_id_per_event, collect_candidates
from tests.support.events import conversation_event, new_id
from tests.support.harness import Integrator, integrator, running_service, settings_for_test
from tests.support.rabbit_cluster import PLUGINS
from tests.support.service_control import PrivateRabbit, private_rabbit
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
def own_broker() -> Iterator[PrivateRabbit]:
    yield from own(lambda: private_rabbit(*PLUGINS), "a private RabbitMQ node")


async def _old_release_queue(client: Integrator, settings: Settings) -> None:
    """The ingress queue as a release before partitions declared it, bound as it bound it."""
    topology = Topology.from_settings(settings.broker)
    arguments = dict(topology.ingress_arguments())
    del arguments["x-single-active-consumer"]
    queue = await client.channel.declare_queue(
        topology.ingress_queue, durable=True, arguments=arguments
    )
    await queue.bind(client.exchange, routing_key=topology.ingress_routing_key)


def _events(count: int) -> list[dict[str, Any]]:
    key = ConversationKey("tpart", new_id("u"), new_id("c"))
    return [conversation_event(key, f"message {n}") for n in range(count)]


def _queues_sample(registry: Any, role: str) -> float:
    return float(registry.get_sample_value("llmbot_ingress_queues", {"role": role}) or 0.0)


async def test_a_queue_of_a_release_before_partitions_is_consumed_as_it_is(
    make_settings: Any, fake_model: FakeModelServer
) -> None:
    """One partition, an ingress queue without the single-active-consumer argument (queue
    arguments cannot change): the service starts on it, says it is unordered, answers."""
    settings = make_settings()
    registry = CollectorRegistry()
    events = _events(3)
    async with integrator(settings) as client:
        await _old_release_queue(client, settings)
        for event in events:
            await client.publish(event)
        async with running_service(settings, registry=registry):
            received = await collect_candidates(client, [str(e["id"]) for e in events])
    assert_one_candidate_id_per_event(received, [str(e["id"]) for e in events])
    assert _queues_sample(registry, "unordered") == 1
    assert _queues_sample(registry, "partition") == 0


async def test_moving_to_partitions_drains_the_single_queue_and_routes_new_events_to_them(
    service_urls: ServiceUrls, own_broker: PrivateRabbit, fake_model: FakeModelServer
) -> None:
    """Events queued in the single queue before a move to 3 partitions are answered; the
    single queue is unbound (new events go to the partitions only) and consumed until
    deleted; going back to one partition drains the partitions the same way."""
    urls = ServiceUrls(own_broker.url, service_urls.redis_url)
    settings = settings_for_test(urls, fake_model.base_url)
    partitioned = settings.model_copy(update={"ingress_partitions": 3})
    queued, later = _events(10), _events(10)
    registry = CollectorRegistry()
    async with integrator(settings) as client:
        await _old_release_queue(client, settings)
        for event in queued:
            await client.publish(event)
        async with running_service(partitioned, registry=registry):
            received = await collect_candidates(client, [str(e["id"]) for e in queued])
            for event in later:
                await client.publish(event)
            received += await collect_candidates(client, [str(e["id"]) for e in later])
            single = await client.channel.declare_queue(settings.ingress_queue, passive=True)
            assert single.declaration_result.message_count == 0
            assert _queues_sample(registry, "draining") == 1
            assert _queues_sample(registry, "partition") == 3
        # a stopped service: an event now waits in a partition, not in the single queue
        extra = _events(1)
        await client.publish(extra[0])
        depths = [
            await client.queue_depth(name)
            for name in Topology.from_settings(partitioned.broker).partition_queues()
        ]
        assert sum(depths) == 1
        assert await client.queue_depth(settings.ingress_queue) == 0
        # back to one partition: the three are unbound and drained, the event is answered
        await client.channel.queue_delete(settings.ingress_queue)
        back = CollectorRegistry()
        async with running_service(settings, registry=back):
            received += await collect_candidates(client, [str(extra[0]["id"])])
            assert _queues_sample(back, "draining") == 3
    ids = [str(e["id"]) for e in [*queued, *later, *extra]]
    assert_one_candidate_id_per_event(received, ids)
    async with await aio_pika.connect(own_broker.url) as connection:
        channel = await connection.channel()
        for name in Topology.from_settings(partitioned.broker).partition_queues():
            await channel.queue_delete(name)
