"""The fair queue on real Redis: hand-off, turns, recovery (adapters/redis_fair_queue.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import cast

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.held_message import HeldMessage, decode_held
from llm_bot.adapters.redis_fair_queue import (
    OVERFLOW_IDS_TTL_SECONDS,
    Admitted,
    Busy,
    Hand,
    RedisFairQueue,
    Taken,
)
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.from_url(service_urls.redis_url)
    yield redis
    await redis.aclose()


def _queue(client: aioredis.Redis, *, lease_seconds: float = 5.0) -> RedisFairQueue:
    lane = f"lane-{uuid.uuid4().hex[:8]}"  # each test its own global index
    return RedisFairQueue(
        client=client,
        keys=RedisKeys(prefix=TEST_KEY_PREFIX),
        lane=lane,
        lease_seconds=lease_seconds,
    )


def _conversation(tenant: str = "t1") -> ConversationKey:
    return ConversationKey(tenant, new_id("u"), new_id("c"))


def _held(text: str) -> HeldMessage:
    return HeldMessage(body=text.encode(), message_id=text, received_at=1.0)


async def _take(queue: RedisFairQueue, tenant: str) -> Taken:
    taken = await queue.take(tenant)
    assert isinstance(taken, Taken)
    return taken


async def test_a_conversation_is_taken_in_arrival_order_one_delivery_at_a_time(
    client: aioredis.Redis,
) -> None:
    """The first delivery makes its conversation ready; the rest queue behind it; each
    completion hands the next one over, oldest first."""
    queue = _queue(client)
    key = _conversation()
    admitted = await queue.admit([(key, _held(f"m{n}"), None) for n in range(3)])
    assert [what for _, what in admitted] == [Admitted.READY, Admitted.QUEUED, Admitted.QUEUED]
    await queue.make_ready(key)
    assert await queue.ready_tenants() == {"t1"}
    seen = []
    for _ in range(3):
        taken = await _take(queue, "t1")
        assert await queue.take("t1") is None  # one at a time: not ready while held
        seen.append(taken.message.body.decode())
        await queue.complete(taken)
    assert seen == ["m0", "m1", "m2"]
    assert await queue.ready_tenants() == set()
    assert await queue.ready_count() == 0


async def test_admission_with_a_token_takes_a_free_conversation_at_once(
    client: aioredis.Redis,
) -> None:
    """The fast path: the first delivery of a free conversation is taken by its admitter;
    the next one of that conversation queues behind it."""
    queue = _queue(client)
    key = _conversation()
    token = queue.new_token()
    admitted = await queue.admit([(key, _held("a"), token), (key, _held("b"), queue.new_token())])
    assert [what for _, what in admitted] == [Admitted.TAKEN, Admitted.QUEUED]
    first = Taken(key, admitted[0][0], _held("a"), token, 1)
    assert await queue.complete(first) == 1  # "b" waits, and its conversation is ready
    taken = await _take(queue, "t1")
    assert taken.message.body == b"b"


async def test_a_completion_takes_the_next_conversation_in_its_round_trip(
    client: aioredis.Redis,
) -> None:
    """On one server the next take and the look at the tenants ride with a completion;
    the completed conversation, with more behind it, goes to the back of the turn."""
    queue = _queue(client)
    assert queue.takes_with_completion
    busy, other = _conversation(), _conversation()
    await queue.admit([(busy, _held(f"b{n}"), None) for n in range(2)])
    await queue.make_ready(busy)
    await asyncio.sleep(0.002)
    await queue.admit([(other, _held("o0"), None)])
    await queue.make_ready(other)
    first = await _take(queue, "t1")
    assert (first.message.body, first.behind) == (b"b0", 1)
    await asyncio.sleep(0.002)  # ready scores are milliseconds: a tie goes by member name
    done = await queue.complete_and_take(first, "t1", look=True)
    assert done.remaining == 1
    assert isinstance(done.taken, Taken)
    assert (done.taken.message.body, done.taken.behind) == (b"o0", 0)
    assert done.tenants == {"t1"}  # "b1" is ready
    last = await queue.complete_and_take(done.taken, "t1", look=True)
    assert (last.remaining, last.tenants) == (0, set())
    assert isinstance(last.taken, Taken)
    assert last.taken.message.body == b"b1"
    assert await queue.complete(last.taken) == 0
    assert await queue.ready_count() == 0


async def test_tenants_conversations_take_turns(client: aioredis.Redis) -> None:
    """A conversation that completes goes to the back of its tenant's turn."""
    queue = _queue(client)
    busy, other = _conversation(), _conversation()
    await queue.admit([(busy, _held(f"b{n}"), None) for n in range(3)])
    await queue.make_ready(busy)
    await asyncio.sleep(0.002)
    await queue.admit([(other, _held("o0"), None)])
    await queue.make_ready(other)
    first = await _take(queue, "t1")
    assert first.key == busy
    await asyncio.sleep(0.002)
    await queue.complete(first)  # busy has more: ready again, behind other
    assert (await _take(queue, "t1")).key == other


async def test_a_dead_takers_conversation_is_recovered_with_its_head(
    client: aioredis.Redis,
) -> None:
    """A taker that never completes (it died): once its lease lapses, recovery makes the
    conversation ready again and the same delivery is taken again, counted."""
    queue = _queue(client, lease_seconds=0.2)
    key = _conversation()
    await queue.admit([(key, _held("m0"), None)])
    await queue.make_ready(key)
    dead = await _take(queue, "t1")
    assert await queue.recover() == 0  # its lease is alive
    await asyncio.sleep(0.35)
    assert await queue.recover() == 1
    again = await _take(queue, "t1")
    assert (again.uid, again.message.body, again.times_taken) == (dead.uid, b"m0", 2)
    await queue.complete(dead)  # the dead taker's late completion changes nothing
    assert (await queue.take("t1")) is None
    await queue.complete(again)
    assert await queue.recover() == 0


async def test_a_lease_held_outside_the_queue_makes_the_take_wait_briefly(
    client: aioredis.Redis,
) -> None:
    """The memory worker holds the conversation's lease: the take answers Busy and the
    conversation is ready again a little later."""
    queue = _queue(client)
    keys = RedisKeys(prefix=TEST_KEY_PREFIX)
    key = _conversation()
    await client.set(keys.lease(key), "worker:1", px=5000)
    await queue.admit([(key, _held("m0"), None)])
    await queue.make_ready(key)
    assert isinstance(await queue.take("t1"), Busy)
    assert await queue.take("t1") is None  # not due yet
    await client.delete(keys.lease(key))
    await asyncio.sleep(0.15)
    assert (await _take(queue, "t1")).message.body == b"m0"


async def test_release_puts_the_head_back_for_another_taker(client: aioredis.Redis) -> None:
    """Shutdown: a released delivery stays first and its conversation is ready again."""
    queue = _queue(client)
    key = _conversation()
    await queue.admit([(key, _held("m0"), None), (key, _held("m1"), None)])
    await queue.make_ready(key)
    taken = await _take(queue, "t1")
    await queue.release(taken)
    again = await _take(queue, "t1")
    assert again.message.body == b"m0"


async def test_lanes_keep_deployments_apart(client: aioredis.Redis) -> None:
    """Two ingress queues sharing a key prefix never take each other's conversations."""
    one, two = _queue(client), _queue(client)
    key = _conversation("shared")
    await one.admit([(key, _held("m0"), None)])
    await one.make_ready(key)
    assert await two.ready_tenants() == set()
    assert await two.take("shared") is None
    assert (await _take(one, "shared")).message.body == b"m0"


async def test_an_admitters_death_before_it_readied_the_conversation_is_recovered(
    client: aioredis.Redis,
) -> None:
    """Stored but never made ready nor taken (the admitter died in between): the watch
    entry written with the delivery makes recovery ready it once its lease time passed."""
    queue = _queue(client, lease_seconds=0.2)
    key = _conversation()
    ((_, what),) = await queue.admit([(key, _held("m0"), None)])
    assert what is Admitted.READY  # ...and the admitter dies before make_ready
    assert await queue.take("t1") is None
    await asyncio.sleep(0.3)
    assert await queue.recover() == 1
    assert (await _take(queue, "t1")).message.body == b"m0"


async def test_new_events_do_not_postpone_the_recovery_of_a_dead_takers_conversation(
    client: aioredis.Redis,
) -> None:
    """A user who keeps writing to a conversation whose taker died: recovery still comes
    one lease period after the take, not after the last message."""
    queue = _queue(client, lease_seconds=0.3)
    key = _conversation()
    await queue.admit([(key, _held("m0"), None)])
    await queue.make_ready(key)
    await _take(queue, "t1")  # ...and its taker dies
    for n in range(1, 5):
        await asyncio.sleep(0.1)
        await queue.admit([(key, _held(f"m{n}"), None)])
    assert await queue.recover() == 1
    assert (await _take(queue, "t1")).message.body == b"m0"


async def test_a_conversation_with_deliveries_in_the_overflow_sends_its_later_ones_behind(
    client: aioredis.Redis,
) -> None:
    """A delivery moved to the overflow is noted by event id; while any is noted, the
    conversation's later deliveries move too (publish order), other conversations are
    admitted; one coming back from the overflow is admitted and struck off, and once none
    is noted the conversation's deliveries are admitted again."""
    queue = _queue(client)
    moved_on, other = _conversation(), _conversation()
    keys = RedisKeys(prefix=TEST_KEY_PREFIX)

    async def hand(key: ConversationKey, text: str, how: Hand) -> Admitted:
        [(_, what)] = await queue.admit([(key, _held(text), None)], hands=[(how, text)])
        return what

    assert await hand(moved_on, "e1", Hand.OVERFLOW) is Admitted.MOVED
    assert await hand(moved_on, "e2", Hand.IN_ORDER) is Admitted.MOVED  # behind e1
    assert await hand(other, "o1", Hand.IN_ORDER) is Admitted.READY
    assert await client.llen(keys.parked(moved_on)) == 0
    assert await client.smembers(keys.parked_overflow(moved_on)) == {b"e1", b"e2"}
    assert 0 < await client.ttl(keys.parked_overflow(moved_on)) <= OVERFLOW_IDS_TTL_SECONDS
    assert await hand(moved_on, "e1", Hand.BACK) is Admitted.READY  # from the overflow
    assert await hand(moved_on, "e3", Hand.IN_ORDER) is Admitted.MOVED  # e2 still there
    assert await hand(moved_on, "e2", Hand.BACK) is Admitted.QUEUED
    assert await hand(moved_on, "e3", Hand.BACK) is Admitted.QUEUED
    assert not await client.exists(keys.parked_overflow(moved_on))
    assert await hand(moved_on, "e4", Hand.IN_ORDER) is Admitted.QUEUED  # admitted again
    parked = await client.lrange(keys.parked(moved_on), 0, -1)
    assert [decode_held(cast("bytes", p))[1].body for p in parked] == [b"e1", b"e2", b"e3", b"e4"]
