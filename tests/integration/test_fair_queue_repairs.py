"""The fair queue when leases, watch entries or Redis's copy of a waiting event go missing
(issue 42): a retry after a lost lease, the recovery race, a conversation nothing would
hand over, and deliveries Redis lost, each on real Redis."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry
from redis.commands.core import AsyncScript

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_fair_queue import Admitted, RedisFairQueue, Taken
from llm_bot.adapters.redis_keys import RedisKeys, activity_member
from llm_bot.delivery.fair_dispatch import FairDispatcher, Fairness
from llm_bot.delivery.unanswered import Offered
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.erasure import Eraser
from llm_bot.service.fairness import TenantShares
from llm_bot.service.handler import Delivery, EventHandler
from llm_bot.service.outcomes import DeadLetter, LetGo, Replied
from llm_bot.service.retry import RetryPolicy
from llm_bot.telemetry.metrics import Metrics
from tests.support.events import message_event, new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.in_memory import InMemoryLease
from tests.support.reply_path import reply_path
from tests.support.services import ServiceUrls
from tests.unit.test_handler import NoLongTermMemory

pytestmark = pytest.mark.integration

KEYS = RedisKeys(prefix=TEST_KEY_PREFIX)


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.from_url(service_urls.redis_url)
    yield redis
    await redis.aclose()


def _queue(client: Any, *, lease_seconds: float = 5.0, holder: str | None = None) -> RedisFairQueue:
    return RedisFairQueue(
        client=cast("RedisClient", client),
        keys=KEYS,
        lane=f"lane-{uuid.uuid4().hex[:8]}",
        lease_seconds=lease_seconds,
        holder=holder,
    )


def _conversation(tenant: str = "t1") -> ConversationKey:
    return ConversationKey(tenant, new_id("u"), new_id("c"))


def _held(text: str) -> HeldMessage:
    return HeldMessage(body=text.encode(), message_id=text, received_at=1.0)


async def _take(queue: RedisFairQueue, tenant: str) -> Taken:
    taken = await queue.take(tenant)
    assert isinstance(taken, Taken)
    return taken


# --- a retry after a lost lease ----------------------------------------------------------


async def test_a_retry_after_the_lease_went_to_another_taker_lets_the_event_go(
    client: aioredis.Redis,
) -> None:
    """The commit is fenced (the lease lapsed and another replica took the conversation):
    the retry asks the fair queue first, finds the lease another's and lets the event go.
    One model call, no ErrorV1 (before: every retry called the model, was fenced again,
    and the event was dead-lettered while the other taker answered it)."""
    queue = _queue(client)
    key = _conversation()
    body = message_event(
        tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text="hi"
    )
    [(_, what)] = await queue.admit([(key, HeldMessage(body=json.dumps(body).encode()), None)])
    assert what is Admitted.READY
    await queue.make_ready(key)
    mine = await _take(queue, key.tenant_id)
    await client.set(KEYS.lease(key), "another-replica:token")  # it lapsed; another took it
    path = reply_path()
    path.lease.tokens[key] = "another-replica:token"  # what the commit is fenced against
    handler = EventHandler(
        chats=path.runner,
        flows=None,
        lease=path.lease,
        eraser=Eraser(store=path.memory, ltm=NoLongTermMemory()),
        retry=RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0),
        max_body_bytes=1 << 20,
        log_content=False,
        metrics=path.metrics,
    )
    delivery = Delivery(
        body=mine.message.body, lease_token=mine.token, still_ours=lambda: queue.retake(mine)
    )
    outcome = await handler.handle(delivery)
    assert isinstance(outcome, LetGo)
    assert not isinstance(outcome, DeadLetter | Replied)
    assert len(path.model.calls) == 1
    assert path.memory.commits == []


async def test_a_lapsed_lease_is_taken_again_with_the_same_token_only_while_the_event_is_head(
    client: aioredis.Redis,
) -> None:
    """``retake``: held with the token (renewed), free while the delivery is still its
    conversation's head (taken again, same token: the commit's fencing accepts it), held by
    another, or the delivery completed meanwhile (no longer head): let go."""
    queue = _queue(client)
    key = _conversation()
    await queue.admit([(key, _held("m0"), None), (key, _held("m1"), None)])
    await queue.make_ready(key)
    mine = await _take(queue, key.tenant_id)
    assert await queue.retake(mine)
    await client.delete(KEYS.lease(key))  # lapsed
    assert await queue.retake(mine)
    assert (await client.get(KEYS.lease(key))) == mine.token.encode()
    await client.set(KEYS.lease(key), "other")
    assert not await queue.retake(mine)
    await client.delete(KEYS.lease(key))
    await queue.complete(mine)  # m0 done: m1 is the head now
    await client.delete(KEYS.lease(key))
    assert not await queue.retake(mine)


# --- the recovery race -------------------------------------------------------------------


class _AfterFirstLook:
    """A Redis client that runs ``hook`` once, right after the first pipeline or script
    call (the recovery's look at the conversations it found due), as if another replica's
    admission landed between that look and whatever the recovery does next."""

    def __init__(self, inner: aioredis.Redis) -> None:
        self._inner = inner
        self.hook: Callable[[], Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def register_script(self, script: str) -> AsyncScript:
        return AsyncScript(cast("Any", self), script)

    async def evalsha(self, *args: Any) -> Any:
        result = await self._inner.evalsha(*args)
        await self._fire()
        return result

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = self._inner.pipeline(*args, **kwargs)
        execute = pipe.execute

        async def execute_then_hook(*a: Any, **k: Any) -> Any:
            result = await execute(*a, **k)
            await self._fire()
            return result

        pipe.execute = execute_then_hook  # type: ignore[method-assign]
        return pipe

    async def _fire(self) -> None:
        hook, self.hook = self.hook, None
        if hook is not None:
            await hook()


async def test_an_admission_between_the_recoverys_look_and_its_removal_stays_watched(
    client: aioredis.Redis,
) -> None:
    """Recovery finds a due, empty conversation; an admission takes it (fast path) right
    after the look. Its watch entry must survive, so that when its taker dies the
    conversation is recovered (before: the recovery's second round trip removed it, and
    the conversation stayed stuck until the user wrote again)."""
    racing = _AfterFirstLook(client)
    queue = _queue(racing, lease_seconds=0.2)
    key = _conversation()
    await queue.admit([(key, _held("m0"), None)])
    await queue.make_ready(key)
    await queue.complete(await _take(queue, key.tenant_id))  # empty; its watch entry stays
    await asyncio.sleep(0.3)  # the entry is due

    async def admit_and_take() -> None:
        [(_, what)] = await queue.admit([(key, _held("m1"), queue.new_token())])
        assert what is Admitted.TAKEN  # taken by a replica that now dies

    racing.hook = admit_and_take
    await queue.recover()
    assert racing.hook is None, "the race was not staged"
    shard = queue.shard(key.tenant_id)
    watched = await client.zscore(KEYS.fair_taken(queue._lane, shard), activity_member(key))
    assert watched is not None, "a held conversation was left without a watch entry"
    await asyncio.sleep(0.3)  # the dead taker's lease lapses
    assert await queue.recover() == 1
    again = await _take(queue, key.tenant_id)
    assert again.message.body == b"m1"


# --- the admitter's audit: unwatched conversations, deliveries Redis lost ---------------


class _Delivery:
    """What the audit needs of a RabbitMQ delivery: its channel's state and its ack."""

    class _Channel:
        is_closed = False

    def __init__(self) -> None:
        self.channel = self._Channel()
        self.acked = 0

    async def ack(self) -> None:
        self.acked += 1


def _dispatcher(queue: RedisFairQueue) -> tuple[FairDispatcher, Metrics]:
    metrics = Metrics(registry=CollectorRegistry())

    async def never(*_: Any) -> None:
        raise AssertionError("nothing is processed here")

    fairness = Fairness(
        queue=queue,
        lease=InMemoryLease(),
        shares=TenantShares(slots=4, max_in_flight=4, weights={}),
        max_body_bytes=1 << 20,
        max_takes=5,
        recover_every=60.0,
    )
    return FairDispatcher(fairness=fairness, process=never, dead_letter=never, metrics=metrics), (
        metrics
    )


async def _admitted(
    dispatcher: FairDispatcher, queue: RedisFairQueue, key: ConversationKey, *texts: str
) -> list[tuple[str, _Delivery]]:
    """``texts`` admitted by ``dispatcher``'s replica and held unanswered, as it does."""
    offered = [Offered(cast("Any", _Delivery()), _held(t), key) for t in texts]
    admitted = await queue.admit([(key, o.held, None) for o in offered])
    for (uid, _), one in zip(admitted, offered, strict=True):
        dispatcher.unanswered.add(uid, one)
    return [
        (uid, cast("_Delivery", o.message)) for (uid, _), o in zip(admitted, offered, strict=True)
    ]


def _other_replica(queue: RedisFairQueue) -> RedisFairQueue:
    """Another replica's view of the same fair queue (its own holder id)."""
    return RedisFairQueue(
        client=queue._redis,
        keys=KEYS,
        lane=queue._lane,
        lease_seconds=5.0,
        holder="bbbbbbbbbbbb",
    )


def _sample(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_a_conversation_nothing_would_hand_over_is_made_ready_and_counted(
    client: aioredis.Redis,
) -> None:
    """A conversation with a waiting delivery, no holder, not ready and not watched (its
    watch entry lost) would wait until its user wrote again: the admitter's audit makes it
    ready and counts it in ``llmbot_fair_queue_orphans_repaired_total``."""
    queue = _queue(client)
    dispatcher, metrics = _dispatcher(queue)
    key = _conversation()
    await _admitted(dispatcher, queue, key, "m0")
    await client.delete(KEYS.fair_taken(queue._lane, queue.shard(key.tenant_id)))
    assert await queue.recover() == 0
    assert await queue.take(key.tenant_id) is None  # stuck
    await dispatcher.audit()
    assert _sample(metrics, "llmbot_fair_queue_orphans_repaired_total") == 1
    assert (await _take(queue, key.tenant_id)).message.body == b"m0"
    await dispatcher.audit()  # held now: nothing more to repair
    assert _sample(metrics, "llmbot_fair_queue_orphans_repaired_total") == 1


async def test_deliveries_redis_lost_are_admitted_again_in_order_from_the_broker(
    client: aioredis.Redis,
) -> None:
    """Redis loses a conversation's waiting deliveries and the index (as a restart without
    persistence would): the admitter, which holds them unacked, admits them again under
    the same uids and in the same order; none is acked before it is answered."""
    queue = _queue(client)
    dispatcher, metrics = _dispatcher(queue)
    key = _conversation()
    held = await _admitted(dispatcher, queue, key, "m0", "m1", "m2")
    shard = queue.shard(key.tenant_id)
    await client.delete(
        KEYS.parked(key),
        KEYS.parked_claims(key),
        KEYS.fair_taken(queue._lane, shard),
        KEYS.fair_ready(queue._lane, shard, key.tenant_id),
    )
    await dispatcher.audit()  # missing once: maybe completed elsewhere, its notice unread
    assert _sample(metrics, "llmbot_fair_queue_readmitted_total") == 0
    await dispatcher.audit()  # missing twice: lost
    assert _sample(metrics, "llmbot_fair_queue_readmitted_total") == 3
    other = _other_replica(queue)
    for (uid, delivery), text in zip(held, ("m0", "m1", "m2"), strict=True):
        taken = await _take(other, key.tenant_id)
        assert (taken.uid, taken.message.body) == (uid, text.encode())
        assert delivery.acked == 0
        await other.complete(taken)
    await dispatcher.audit()
    assert _sample(metrics, "llmbot_fair_queue_readmitted_total") == 3
    assert [delivery.acked for _, delivery in held] == [1, 1, 1]


async def test_a_delivery_completed_by_another_replica_is_acked_by_its_admitter(
    client: aioredis.Redis,
) -> None:
    """Replica B completes what replica A admitted: B's completion tells A, which acks its
    delivery (held unacked until then), and A's audit does not admit it again."""
    queue_a = _queue(client, holder="aaaaaaaaaaaa")
    queue_b = _other_replica(queue_a)
    dispatcher, metrics = _dispatcher(queue_a)
    key = _conversation()
    [(uid, delivery)] = await _admitted(dispatcher, queue_a, key, "m0")
    await queue_a.make_ready(key)
    taken = await _take(queue_b, key.tenant_id)
    assert taken.uid == uid
    await queue_b.complete(taken)
    assert delivery.acked == 0
    await dispatcher.audit()
    assert delivery.acked == 1
    assert len(dispatcher.unanswered) == 0
    assert _sample(metrics, "llmbot_fair_queue_readmitted_total") == 0
