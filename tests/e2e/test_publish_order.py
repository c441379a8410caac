"""Publish order past one replica (SPEC 4; issue 42): three ``llm-bot run`` processes, each
conversation's messages published back to back, the replica that admits them killed -9
midway and a replacement started, as Kubernetes would. Every conversation is processed and
remembered in the order it was published, and no event is lost (a dead replica's delivery
may come back answered again with the same candidate id: an integrator drops that copy).

On its own RabbitMQ node (with the consistent-hash exchange plugin) and redis-server, with
one ingress partition (the default) and with several.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.e2e.test_faults import own
from tests.e2e.test_redis_loss import _metric
from tests.support.checks import (
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
)
from tests.support.events import conversation_event, new_id
from tests.support.harness import Received, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.rabbit_cluster import PLUGINS
from tests.support.service_control import PrivateRabbit, PrivateRedis, private_rabbit, private_redis
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.e2e, pytest.mark.fault, pytest.mark.timeout(420)]

CONVERSATIONS = 50
MESSAGES = 20


@pytest.fixture
def own_broker() -> Iterator[PrivateRabbit]:
    yield from own(lambda: private_rabbit(*PLUGINS), "a private RabbitMQ node")


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    yield from own(private_redis, "a private redis-server")


@contextlib.asynccontextmanager
async def _replicas(settings: Settings, log_dir: Path) -> AsyncIterator[list[ConsumerProcess]]:
    """Three replicas, ready (a loaded 2-core machine starts three in well over 30 s)."""
    processes = [ConsumerProcess(settings, log_path=log_dir / f"replica{i}.log") for i in range(3)]
    try:
        await asyncio.gather(*(p.start() for p in processes))
        await asyncio.gather(*(p.wait_ready(within=120) for p in processes))
        yield processes
    finally:
        await asyncio.gather(*(p.stop() for p in processes))


async def _admitter(replicas: list[ConsumerProcess]) -> ConsumerProcess:
    """The replica holding the most admitted, unanswered deliveries (with single active
    consumers, the one the partitions deliver to)."""
    held = [await _metric(p, "llmbot_waiting_events") for p in replicas]
    return replicas[held.index(max(held))]


@pytest.mark.parametrize(
    "shape",  # partitions, conversations, messages, window: the default at full size, 4
    # smaller, and a window of 16 (a tenant bound of 8): most events move through the
    # tenant's overflow queue, which the kill -9 also interrupts
    [(1, CONVERSATIONS, MESSAGES, 2048), (4, 20, 10, 2048), (1, 20, 10, 16)],
    ids=["1-partition", "4-partitions", "overflow"],
)
async def test_three_replicas_keep_each_conversations_publish_order_through_a_kill_9(
    own_broker: PrivateRabbit,
    own_redis: PrivateRedis,
    fake_model: FakeModelServer,
    tmp_path: Path,
    shape: tuple[int, int, int, int],
) -> None:
    """50 conversations x 20 messages (one partition; 20 x 10 with four), each
    conversation's back to back, over 3 replicas;
    the admitting replica killed -9 after a third is answered, a fourth started: every
    event answered (one candidate id each), every conversation remembered in publish
    order, its candidates numbered in that order, nothing dead-lettered or errored; with a
    small window, the same through the tenant's overflow queue."""
    partitions, conversations, messages, window = shape
    fake_model.set_latency(0.01)
    settings = settings_for_test(
        ServiceUrls(own_broker.url, own_redis.url),
        fake_model.base_url,
        prefetch=8,
        lease_seconds=2,
        ingress_partitions=partitions,
        max_waiting=window,
        tenant_max_waiting=window // 2,
    )
    keys = [ConversationKey("tord", new_id("u"), new_id("c")) for _ in range(conversations)]
    events = {
        key: [conversation_event(key, f"message {n}") for n in range(messages)] for key in keys
    }
    every_id = [str(e["id"]) for batch in events.values() for e in batch]
    received: list[Received] = []
    async with integrator(settings) as client, _replicas(settings, tmp_path) as replicas:
        for key in keys:
            for event in events[key]:
                await client.publish(event)
        async with asyncio.timeout(120):
            while len(received) < len(every_id) // 3:
                received.append(await client.candidates.get())
        victim = await _admitter(replicas)
        moved = [await _metric(p, "llmbot_fair_queue_overflowed_total") for p in replicas]
        victim.kill()
        replacement = ConsumerProcess(settings, log_path=tmp_path / "replacement.log")
        replicas.append(replacement)  # _replicas() stops it with the others
        await replacement.start()
        seen = {r.body["event_id"] for r in received}
        rest = [event_id for event_id in every_id if event_id not in seen]
        received += await collect_candidates(client, rest, within=180, settle=2.0)
        assert client.errors.empty(), "an event got an ErrorV1"
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, every_id)
    if window < len(every_id):  # the small window's run went through the overflow
        assert sum(moved) > 0, "nothing moved to the overflow queue before the kill"
    out_of_order = []
    for key in keys:
        ids = [str(e["id"]) for e in events[key]]
        remembered = await assert_memory_turns_exactly_once(settings, key, ids)
        if remembered != ids:
            out_of_order.append(key.conversation_id)
    assert out_of_order == [], f"{len(out_of_order)} of {len(keys)} conversations out of order"
    turns = {r.body["event_id"]: r.body["turn"] for r in received}
    for key in keys:
        assert [turns[str(e["id"])] for e in events[key]] == list(range(1, messages + 1))
