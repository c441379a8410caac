"""Faults against the real services and real consumer processes.

Each test asserts effectively-once: every event id gets exactly one distinct candidate id,
each conversation's memory holds every turn exactly once in order, and the DLQ holds
nothing unexpected. Services stopped by a test are started again before it ends.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import (
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
)
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.service_control import (
    PrivateRabbit,
    PrivateRedis,
    private_rabbit,
    private_redis,
)
from tests.support.services import ServiceUrls

T = TypeVar("T")

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


@asynccontextmanager
async def consumers(
    settings: Settings, count: int, log_dir: Path
) -> AsyncIterator[list[ConsumerProcess]]:
    processes = [
        ConsumerProcess(settings, log_path=log_dir / f"consumer{i}.log") for i in range(count)
    ]
    try:
        await asyncio.gather(*(p.start() for p in processes))
        await asyncio.gather(*(p.wait_ready() for p in processes))
        yield processes
    finally:
        await asyncio.gather(*(p.stop() for p in processes))


def conversation_events(key: ConversationKey, count: int) -> list[dict[str, object]]:
    return [
        message_event(
            tenant=key.tenant_id,
            user=key.user_id,
            conversation=key.conversation_id,
            text=f"message {i}",
        )
        for i in range(count)
    ]


async def integrator_back(client: Integrator, within: float) -> None:
    """Wait for the integrator's robust channel to reopen (it retries every 5 s by default).

    aio-pika does not replay a publish that meets a closed channel, so a test that publishes
    right after the broker came back waits here instead of sleeping a guessed time.
    """
    async with asyncio.timeout(within):
        while client.channel.is_closed:
            await asyncio.sleep(0.1)


async def publish_all(client: Integrator, events: list[dict[str, object]]) -> None:
    for event in events:
        await client.publish(event)


async def test_same_event_published_three_times_is_answered_once(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """Three copies of one event over two processes: one model call, one candidate id."""
    fake_model.set_latency(0.2)
    settings = make_settings()
    key = ConversationKey("tf3", new_id("u"), new_id("c"))
    [event] = conversation_events(key, 1)
    async with integrator(settings) as client, consumers(settings, 2, tmp_path):
        await publish_all(client, [event, event, event])
        received = await collect_candidates(client, [str(event["id"])], settle=1.5)
        assert await dlq_depth(client) == 0
    assert len(received) == 3
    assert_one_candidate_id_per_event(received, [str(event["id"])])
    assert len(fake_model.chat_requests()) == 1
    await assert_memory_turns_exactly_once(settings, key, [str(event["id"])])


async def test_twenty_events_of_one_conversation_over_three_processes(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """One conversation, three consumers: never two model calls at once, every turn once."""
    latency = 0.1
    fake_model.set_latency(latency)
    settings = make_settings(prefetch=4)
    key = ConversationKey("tf20", new_id("u"), new_id("c"))
    events = conversation_events(key, 20)
    ids = [str(e["id"]) for e in events]
    async with integrator(settings) as client, consumers(settings, 3, tmp_path):
        await publish_all(client, events)
        received = await collect_candidates(client, ids)
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, ids)
    order = await assert_memory_turns_exactly_once(settings, key, ids)
    starts = sorted(r.received_at for r in fake_model.chat_requests())
    assert len(starts) == 20
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert min(gaps) >= latency * 0.9, "two model calls of one conversation overlapped"
    turn_of = {event_id: turn for turn, event_id in enumerate(order, start=1)}
    assert all(r.body["turn"] == turn_of[r.body["event_id"]] for r in received)


async def test_kill_9_of_a_consumer_holding_unacked_deliveries(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """SIGKILL mid-stream: its deliveries are redelivered and answered once, nothing lost."""
    fake_model.set_latency(0.15)
    settings = make_settings(prefetch=8, lease_seconds=2)
    keys = [ConversationKey("tfk", new_id("u"), new_id("c")) for _ in range(6)]
    events = [e for key in keys for e in conversation_events(key, 5)]
    ids = [str(e["id"]) for e in events]
    async with integrator(settings) as client, consumers(settings, 2, tmp_path) as procs:
        await publish_all(client, events)
        first = await client.next_candidate(within=30)
        # Kill while model calls are in flight (the fake model holds each 0.15 s).
        await fake_model.requests_started(len(fake_model.chat_requests()) + 2)
        procs[0].kill()
        received = [
            first,
            *await collect_candidates(client, set(ids) - {first.body["event_id"]}, within=90),
        ]
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, ids)
    for key in keys:
        per_conv = [str(e["id"]) for e in events if e["conversation_id"] == key.conversation_id]
        await assert_memory_turns_exactly_once(settings, key, per_conv)


def own(instance: Callable[[], AbstractContextManager[T]], what: str) -> Iterator[T]:
    try:
        with instance() as running:
            yield running
    except RuntimeError as exc:
        pytest.fail(f"could not start {what}: {exc}", pytrace=False)


@pytest.fixture
def own_broker() -> Iterator[PrivateRabbit]:
    """A RabbitMQ node of this test's own: the machine's broker is never stopped."""
    yield from own(private_rabbit, "a private RabbitMQ node")


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    """A redis-server of this test's own: the machine's Redis is never stopped."""
    yield from own(private_redis, "a private redis-server")


async def test_broker_restart_mid_stream_is_survived_without_process_restart(
    service_urls: ServiceUrls,
    own_broker: PrivateRabbit,
    fake_model: FakeModelServer,
    tmp_path: Path,
) -> None:
    """stop_app/start_app of the test's own node: the consumer reconnects by itself,
    /readyz follows."""
    fake_model.set_latency(0.05)
    urls = ServiceUrls(own_broker.url, service_urls.redis_url)
    settings = settings_for_test(urls, fake_model.base_url)
    key = ConversationKey("tfb", new_id("u"), new_id("c"))
    before, after = conversation_events(key, 5), conversation_events(key, 5)
    ids = [str(e["id"]) for e in before + after]
    async with (
        integrator(settings, durable=True) as client,
        consumers(settings, 1, tmp_path) as [proc],
    ):
        await publish_all(client, before)
        try:
            await asyncio.to_thread(own_broker.stop_app)
            await proc.wait_readyz(503)
        finally:
            await asyncio.to_thread(own_broker.start_app)
        await proc.wait_ready()
        assert proc.process is not None
        assert proc.process.returncode is None
        await integrator_back(client, within=30)
        await publish_all(client, after)
        received = await collect_candidates(client, ids, within=90)
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event(received, ids)
    order = await assert_memory_turns_exactly_once(settings, key, ids)
    assert order[5:] == ids[5:]


async def test_redis_restart_mid_stream_retries_and_loses_nothing(
    service_urls: ServiceUrls,
    own_redis: PrivateRedis,
    fake_model: FakeModelServer,
    tmp_path: Path,
) -> None:
    """The test's own Redis shut down and restarted: events are retried, none lost or
    doubled."""
    fake_model.set_latency(0.05)
    urls = ServiceUrls(service_urls.amqp_url, own_redis.url)
    settings = settings_for_test(urls, fake_model.base_url, max_attempts=10, retry_base_seconds=0.3)
    keys = [ConversationKey("tfr", new_id("u"), new_id("c")) for _ in range(3)]
    events = [e for key in keys for e in conversation_events(key, 4)]
    ids = [str(e["id"]) for e in events]
    async with integrator(settings) as client, consumers(settings, 1, tmp_path) as [proc]:
        await publish_all(client, events[::2])
        first = await client.next_candidate(within=30)
        try:
            await asyncio.to_thread(own_redis.shutdown_saving)
            await publish_all(client, events[1::2])
            await proc.wait_readyz(503)
        finally:
            await asyncio.to_thread(own_redis.start)
        rest = await collect_candidates(client, set(ids) - {first.body["event_id"]}, within=90)
        await proc.wait_ready()
        assert await dlq_depth(client) == 0
    assert_one_candidate_id_per_event([first, *rest], ids)
    for key in keys:
        per_conv = [str(e["id"]) for e in events if e["conversation_id"] == key.conversation_id]
        await assert_memory_turns_exactly_once(settings, key, per_conv)
