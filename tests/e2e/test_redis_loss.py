"""Redis lost mid-load (issue 42): the default configuration (fair dispatch) against a
redis-server of the test's own that persists nothing, killed -9 and restarted empty while
hundreds of events wait. RabbitMQ still holds every waiting event (each is acked only once
answered), so none is lost: each ends with exactly one candidate id, none with an ErrorV1
as well, nothing dead-lettered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from llm_bot.fake_model import FakeModelServer
from tests.e2e.test_faults import consumers, own, publish_all
from tests.support.checks import assert_one_candidate_id_per_event, dlq_depth
from tests.support.events import message_event, new_id
from tests.support.harness import Received, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.service_control import PrivateRedis, private_redis
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

EVENTS = 300
CONVERSATIONS = 30


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    yield from own(private_redis, "a private redis-server")


async def _metric(process: ConsumerProcess, name: str) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{process.http_port}/metrics") as response,
    ):
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


async def test_redis_killed_and_restarted_empty_while_events_wait_loses_none(
    service_urls: ServiceUrls, own_redis: PrivateRedis, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.set_latency(0.25)
    urls = ServiceUrls(service_urls.amqp_url, own_redis.url)
    settings = settings_for_test(
        urls,
        fake_model.base_url,
        prefetch=8,
        lease_seconds=3,
        max_attempts=10,
        retry_base_seconds=0.3,
    )
    tenant, user = "tloss", new_id("u")
    conversations = [new_id("c") for _ in range(CONVERSATIONS)]
    events = [
        message_event(tenant=tenant, user=user, conversation=c, text=f"message {n}")
        for n in range(EVENTS // CONVERSATIONS)
        for c in conversations
    ]
    ids = [str(e["id"]) for e in events]
    received: list[Received] = []
    async with integrator(settings) as client, consumers(settings, 2, tmp_path) as replicas:
        await publish_all(client, events)
        async with asyncio.timeout(30):  # every event delivered: none waits in the queue
            while await client.ingress_depth() > 0:
                await asyncio.sleep(0.05)
        while not client.candidates.empty():
            received.append(client.candidates.get_nowait())
        answered_before = {r.body["event_id"] for r in received}
        await asyncio.to_thread(own_redis.kill)
        assert EVENTS - len(answered_before) >= 250, "fewer than 250 events waited"
        await asyncio.sleep(0.5)
        await asyncio.to_thread(own_redis.start)
        waiting = set(ids) - answered_before
        async with asyncio.timeout(180):
            while waiting:
                candidate = await client.candidates.get()
                received.append(candidate)
                waiting.discard(candidate.body["event_id"])
        await asyncio.sleep(2.0)  # late copies, if any
        while not client.candidates.empty():
            received.append(client.candidates.get_nowait())
        errors = []
        while not client.errors.empty():
            errors.append(client.errors.get_nowait())
        assert await dlq_depth(client) == 0
        readmitted = sum([await _metric(p, "llmbot_fair_queue_readmitted_total") for p in replicas])
    assert errors == [], f"{len(errors)} events got an ErrorV1"
    assert_one_candidate_id_per_event(received, ids)
    assert readmitted > 0, "the waiting events were not admitted again from the broker"
