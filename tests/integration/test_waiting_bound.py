"""What waits outside the broker is bounded per tenant (SPEC 4 "Bounded waiting"; issue 42):
a replica admits at most ``LLM_BOT_TENANT_MAX_WAITING`` of a tenant's deliveries to Redis;
the tenant's further deliveries wait in the replica, unacked and in order, while another
tenant's are admitted; each answer lets the next one in (without an overflow queue: the
dispatcher alone). With one, a tenant's deliveries past its bound move there.
Real Redis, the real dispatcher (the broker's side: tests/e2e/test_flood_overflow.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_fair_queue import RedisFairQueue
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.delivery.fair_dispatch import FairDispatcher, Fairness
from llm_bot.delivery.overflow_moves import MoveToOverflow
from llm_bot.delivery.settlements import Settlement
from llm_bot.delivery.unanswered import Offered
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.fairness import TenantShares
from llm_bot.telemetry.metrics import Metrics
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.in_memory import InMemoryLease
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

KEYS = RedisKeys(prefix=TEST_KEY_PREFIX)
BOUND = 10


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.from_url(service_urls.redis_url)
    yield redis
    await redis.aclose()


class _Delivery:
    class _Channel:
        is_closed = False

    def __init__(self, text: str) -> None:
        self.text = text
        self.channel = self._Channel()
        self.acked = 0
        self.nacked = 0

    async def ack(self) -> None:
        self.acked += 1

    async def nack(self, *, requeue: bool = True) -> None:
        self.nacked += 1


class _Slowly:
    """The consumer's processing, held until the test answers an event."""

    def __init__(self) -> None:
        self.running: dict[str, Settlement] = {}
        self.started: list[str] = []

    async def __call__(self, held: HeldMessage, settlement: Settlement, *_: Any) -> None:
        text = held.body.decode()
        self.started.append(text)
        self.running[text] = settlement
        while text in self.running:
            await asyncio.sleep(0.01)

    async def answer(self, text: str) -> None:
        await self.running[text].ack()
        del self.running[text]


async def _until(check: Any, within: float = 10.0) -> None:
    async with asyncio.timeout(within):
        while not check():
            await asyncio.sleep(0.02)


def _dispatcher(
    client: aioredis.Redis,
    slowly: _Slowly,
    metrics: Metrics,
    *,
    max_waiting: int,
    overflow: MoveToOverflow | None = None,
) -> FairDispatcher:
    """Two slots, one per tenant, a tenant bound of ``BOUND``, on a lane of its own."""
    queue = RedisFairQueue(
        client=cast("RedisClient", client),
        keys=KEYS,
        lane=f"lane-{uuid.uuid4().hex[:8]}",
        lease_seconds=5.0,
    )

    async def never(*_: Any) -> None:
        raise AssertionError("nothing is dead-lettered here")

    return FairDispatcher(
        fairness=Fairness(
            queue=queue,
            lease=InMemoryLease(),
            shares=TenantShares(slots=2, max_in_flight=1, weights={}),
            max_body_bytes=1 << 20,
            max_takes=5,
            recover_every=60.0,
            max_waiting=max_waiting,
            tenant_max_waiting=BOUND,
            overflow=overflow,
        ),
        process=slowly,
        dead_letter=never,
        metrics=metrics,
    )


async def test_a_tenant_past_its_bound_waits_unacked_while_another_is_admitted(
    client: aioredis.Redis,
) -> None:
    metrics = Metrics(registry=CollectorRegistry())
    slowly = _Slowly()
    dispatcher = _dispatcher(client, slowly, metrics, max_waiting=64)
    flood = [ConversationKey("flood", new_id("u"), new_id("c")) for _ in range(15)]
    quiet = [ConversationKey("quiet", new_id("u"), new_id("c")) for _ in range(3)]
    deliveries: dict[str, _Delivery] = {}
    dispatcher.start()
    try:
        for n, key in enumerate([*flood, *quiet]):
            text = f"{key.tenant_id}-{n}"
            deliveries[text] = _Delivery(text)
            message = cast("Any", deliveries[text])
            dispatcher.offer(message, HeldMessage(body=text.encode()), key)
        await _until(lambda: len(dispatcher.unanswered) == BOUND + 3)
        parked = {key.tenant_id: 0 for key in flood + quiet}
        for key in flood + quiet:
            parked[key.tenant_id] += int(await client.llen(KEYS.parked(key)))
        assert parked == {"flood": BOUND, "quiet": 3}  # the quiet tenant got past the flood
        dispatcher.unanswered.report()
        waiting = metrics.registry.get_sample_value
        assert waiting("llmbot_waiting_events", {"tenant": "flood"}) == 15
        assert waiting("llmbot_waiting_events", {"tenant": "quiet"}) == 3
        assert not any(d.acked or d.nacked for d in deliveries.values())  # the broker keeps all
        await _until(lambda: "quiet-15" in slowly.started)  # the quiet tenant runs
        first = next(t for t in slowly.started if t.startswith("flood"))
        await slowly.answer(first)
        assert deliveries[first].acked == 1
        await _until(lambda: len(dispatcher.unanswered) == BOUND + 3)
        assert sum([int(await client.llen(KEYS.parked(k))) for k in flood]) == BOUND
        # the next in delivery order was let in: flood-10 (0..9 were admitted first)
        assert int(await client.llen(KEYS.parked(flood[BOUND]))) == 1
        assert int(await client.llen(KEYS.parked(flood[BOUND + 1]))) == 0
    finally:
        for task in await dispatcher.stop_taking():
            task.cancel()
    held_back = [d for t, d in deliveries.items() if t.startswith("flood") and d.nacked]
    assert len(held_back) == 4  # given back to the broker at shutdown, never acked


async def test_past_its_bound_a_tenant_moves_to_its_overflow_and_a_refused_move_stays_unacked(
    client: aioredis.Redis,
) -> None:
    """With an overflow: a tenant's deliveries past its bound are copied there and acked
    once the copy is confirmed; a copy the broker refused leaves its
    delivery unacked in the replica, moved again a second later; another tenant is admitted
    meanwhile."""
    metrics = Metrics(registry=CollectorRegistry())
    slowly = _Slowly()
    moved: list[str] = []
    refuse = [True]

    async def mover(offered: Sequence[Offered]) -> list[bool]:
        if refuse[0]:
            return [False] * len(offered)
        moved.extend(o.held.body.decode() for o in offered)
        return [True] * len(offered)

    # 3/4 full once the flood is admitted: what it holds moves
    dispatcher = _dispatcher(client, slowly, metrics, max_waiting=16, overflow=mover)
    flood = [ConversationKey("flood", new_id("u"), new_id("c")) for _ in range(15)]
    quiet = ConversationKey("quiet", new_id("u"), new_id("c"))
    deliveries: dict[str, _Delivery] = {}
    dispatcher.start()
    try:
        for n, key in enumerate([*flood, quiet]):
            text = f"{key.tenant_id}-{n}"
            deliveries[text] = _Delivery(text)
            dispatcher.offer(
                cast("Any", deliveries[text]), HeldMessage(body=text.encode()), key, event_id=text
            )
        await _until(lambda: len(dispatcher.unanswered) == BOUND + 1)
        await _until(lambda: "quiet-15" in slowly.started)  # admitted past the flood
        refused = [f"flood-{n}" for n in range(BOUND, 15)]
        sample = metrics.registry.get_sample_value
        await _until(lambda: sample("llmbot_fair_queue_overflowed_total", {"result": "refused"}))
        assert not any(deliveries[t].acked for t in refused)  # the broker keeps them
        refuse[0] = False  # tried again a second later, in order
        await _until(lambda: len(moved) == len(refused))
        assert moved == refused  # in delivery order
        await _until(lambda: all(deliveries[t].acked == 1 for t in refused))
        for n in range(BOUND, 15):  # each noted as in the overflow, none admitted
            assert int(await client.llen(KEYS.parked(flood[n]))) == 0
            assert await client.smembers(KEYS.parked_overflow(flood[n])) == {f"flood-{n}".encode()}
    finally:
        for task in await dispatcher.stop_taking():
            task.cancel()
