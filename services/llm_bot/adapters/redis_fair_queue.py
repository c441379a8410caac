"""The fair queue in Redis: deliveries handed off by the ingress consumer, taken per
conversation and per tenant (SPEC 4 "Fairness"; docs/architecture.md says why).

Per conversation, in the user's slot beside its lease:
- ``park``: the conversation's deliveries in arrival order. The head stays until its
  processing is complete, so a replica that dies mid-event leaves it where it was.
- the conversation's lease (the same key and tokens as ``redis_lease.py``): whoever holds
  it processes the head. Taking a conversation is taking its lease.
- ``parkn``: how many times each delivery was taken (a poison bound); written at admission,
  so an admitter's audit can tell a delivery Redis lost.
- ``{fairack:<replica>}:done`` (its own slot): uids of a replica's deliveries that another
  replica completed, for the admitter to ack (it holds each unacked in RabbitMQ).

Global, sharded by tenant over a few slots (every script touches one slot):
- ``ready:<tenant>``: the tenant's conversations that have deliveries and no holder, by
  when they may be taken (oldest first, so a tenant's conversations take turns);
- ``tenants``: the tenants with ready conversations;
- ``taken``: conversations taken, by when to look again: a taker that died stops renewing
  its lease, and :meth:`RedisFairQueue.recover` makes its conversation ready again.

Invariant: a conversation with deliveries is either held (its holder makes it ready again
when it completes) or ready. Every gap between two scripts is covered by ``taken``; what
a lost shard or a cluster race leaves uncovered, the admitters' audits repair.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import cast

from redis.asyncio.cluster import RedisCluster
from redis.typing import EncodableT

from llm_bot.adapters.held_message import HeldMessage, decode_held, encode_held
from llm_bot.adapters.redis_connection import AnyPipeline, RedisClient, queue_script
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_fair_scripts import (
    _ADMIT,
    _AUDIT,
    _COMPLETE,
    _LOOK,
    _POP,
    _POP_AND_TAKE,
    _READY,
    _RECOVER,
    _RELEASE,
    _RETAKE,
    _TAKE,
    ADMITTER_LENGTH,
    UID_LENGTH,
)
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, parse_activity_member
from llm_bot.memory.conversation_key import ConversationKey

FAIR_SHARDS = 4
"""Slots the global index is spread over (Redis Cluster: no node carries all of it)."""
RECOVER_BATCH = 500
ACKS_BATCH = 1000
ACKS_TTL_SECONDS = 3600
"""An admitter's list of completions made elsewhere outlives it by this much at most."""


class Admitted(IntEnum):
    """What became of a delivery handed to the queue."""

    QUEUED = 0
    """Behind others of its conversation: whoever holds or readies it will reach it."""
    READY = 1
    """First of its conversation, not taken: the caller makes the conversation ready."""
    TAKEN = 2
    """First of its conversation, and taken for the caller with the token it gave."""
    MOVED = 3
    """Not admitted: the caller moves it to its tenant's overflow queue (asked to, or
    earlier deliveries of its conversation are there), its event id noted as there."""


class Hand(IntEnum):
    """How a delivery is handed to the queue."""

    IN_ORDER = 0
    """Admitted, unless deliveries of its conversation wait in an overflow queue: then
    :attr:`Admitted.MOVED` (behind them)."""
    OVERFLOW = 1
    """Its tenant is at its bound: :attr:`Admitted.MOVED`."""
    BACK = 2
    """Admitted whatever waits in the overflow (it comes from there, or is admitted again
    after Redis lost it); its event id is struck off the overflow's."""


OVERFLOW_IDS_TTL_SECONDS = 7 * 24 * 3600
"""A conversation's note of deliveries in an overflow queue lives this long after its last
move (a note left by a move whose copy never reached the queue is outlived, not kept)."""


@dataclass(frozen=True)
class Taken:
    """A conversation's head delivery, taken with the conversation's lease."""

    key: ConversationKey
    uid: str
    message: HeldMessage
    token: str
    times_taken: int
    behind: int = 0
    """Deliveries of the conversation waiting behind this one when it was taken: more than
    none, and its completion makes the conversation ready in the same round trip."""


@dataclass(frozen=True)
class Completed:
    """What :meth:`RedisFairQueue.complete_and_take` did."""

    remaining: int
    """Deliveries of the completed conversation still waiting."""
    taken: Taken | Busy | None
    """The take's answer (None also when no take was asked)."""
    tenants: set[str] | None
    """The tenants with ready conversations after the take, when asked to look."""


class Busy:
    """The conversation's lease is held outside the queue (the memory worker, a flow
    expiry): the conversation was made ready again a little later."""


@redis_failures_retryable
class RedisFairQueue:
    """Hand-off, turn-taking and recovery of deliveries, on Redis."""

    def __init__(
        self,
        *,
        client: RedisClient,
        keys: RedisKeys,
        lane: str,
        lease_seconds: float,
        holder: str | None = None,
        shards: int = FAIR_SHARDS,
    ) -> None:
        """``lane``: the ingress queue served (deployments sharing a Redis key prefix keep
        their work apart)."""
        self._redis = client
        self._keys = keys
        self._lane = lane
        self._ttl_ms = int(lease_seconds * 1000)
        self._holder = (holder or uuid.uuid4().hex)[:ADMITTER_LENGTH].ljust(ADMITTER_LENGTH, "0")
        self._shards = shards
        self._admit = client.register_script(_ADMIT)
        self._take = client.register_script(_TAKE)
        self._complete = client.register_script(_COMPLETE)
        self._release = client.register_script(_RELEASE)
        self._look = client.register_script(_LOOK)
        self._ready = client.register_script(_READY)
        self._pop = client.register_script(_POP)
        self._retake = client.register_script(_RETAKE)
        self._audit = client.register_script(_AUDIT)
        one_server = not isinstance(client, RedisCluster)
        self._pop_and_take = client.register_script(_POP_AND_TAKE) if one_server else None
        self._recover = client.register_script(_RECOVER) if one_server else None
        self._name_parts = _conversation_name_parts(keys)

    def new_token(self) -> str:
        """A lease token of this holder (the format of ``RedisConversationLease``)."""
        return f"{self._holder}:{uuid.uuid4().hex}"

    @property
    def holder(self) -> str:
        """This replica's id: the start of the uid of every delivery it admits."""
        return self._holder

    def new_uid(self) -> str:
        return f"{self._holder}{uuid.uuid4().hex[: UID_LENGTH - ADMITTER_LENGTH]}"

    def shard(self, tenant_id: str) -> int:
        return zlib.crc32(tenant_id.encode()) % self._shards

    async def admit(
        self,
        items: Sequence[tuple[ConversationKey, HeldMessage, str | None]],
        uids: Sequence[str] | None = None,
        hands: Sequence[tuple[Hand, str]] | None = None,
    ) -> list[tuple[str, Admitted]]:
        """Store deliveries at the end of their conversations, in order, in one round trip;
        with a token, also take the conversation when the delivery is its first. Returns
        each delivery's uid and what became of it. ``uids``: the uids they had (admitted
        again after Redis lost them), else new ones. ``hands``: how each is handed, with
        its event id (default: :attr:`Hand.IN_ORDER`)."""
        uids = list(uids) if uids is not None else [self.new_uid() for _ in items]
        hands = list(hands) if hands is not None else [(Hand.IN_ORDER, "")] * len(items)
        later = self._later()
        watch: dict[int, dict[str, int]] = {}
        for key, _, _ in items:
            watch.setdefault(self.shard(key.tenant_id), {})[self._member(key)] = later
        async with self._redis.pipeline(transaction=False) as pipe:
            # Watched before they are stored (one ZADD per shard): if the admitter dies
            # before it takes or readies a conversation, recovery readies it once due.
            for shard, members in watch.items():
                # NX: a conversation's new events never postpone its recovery
                pipe.zadd(self._keys.fair_taken(self._lane, shard), members, nx=True)
            for uid, (key, held, token), (hand, event_id) in zip(uids, items, hands, strict=True):
                queue_script(
                    pipe,
                    self._admit,
                    keys=[*self._conversation_keys(key), self._keys.parked_overflow(key)],
                    args=[
                        encode_held(uid, held),
                        int(token is not None),
                        token or "",
                        self._ttl_ms,
                        uid,
                        int(hand),
                        event_id,
                        OVERFLOW_IDS_TTL_SECONDS,
                    ],
                )
            results = await pipe.execute()
        admitted = [Admitted(int(str(answer))) for answer in results[len(watch) :]]
        return list(zip(uids, admitted, strict=True))

    async def make_ready(self, *keys: ConversationKey, delay: float = 0.0) -> None:
        """The conversations may be taken (``delay`` seconds from now); one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                await self._mark_ready(pipe, key, delay)
            await pipe.execute()

    async def ready_tenants(self) -> set[str]:
        """The tenants with ready conversations, over every shard."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for shard in range(self._shards):
                pipe.smembers(self._keys.fair_tenants(self._lane, shard))
            return _tenants(await pipe.execute())

    @property
    def takes_with_completion(self) -> bool:
        """Whether :meth:`complete_and_take` may be used: on one server (a cluster keeps a
        conversation's keys and the index in different slots)."""
        return self._pop_and_take is not None

    async def take(self, tenant_id: str) -> Taken | Busy | None:
        """The tenant's next ready conversation with its head delivery, under a new lease;
        None when it has none due. One round trip on one server, two on a cluster (the
        conversation's keys are in another slot than the index)."""
        token = self.new_token()
        if self._pop_and_take is not None:
            keys, args = self._pop_and_take_call(tenant_id, token)
            return self._answer(await self._pop_and_take(keys=keys, args=args), token)
        shard = self.shard(tenant_id)
        member = await self._pop(
            keys=self._index_keys(tenant_id), args=[tenant_id, _now_ms(), self._later()]
        )
        if member is None:
            return None
        key = parse_activity_member(_text(member))
        result = await self._take(keys=self._conversation_keys(key), args=[token, self._ttl_ms])
        if result[0] == 2:
            uid, held = decode_held(result[1])
            return Taken(key, uid, held, token, int(result[2]), int(result[3]))
        if result[0] == 1:  # ready again, unwatched, in one script (one slot)
            async with self._redis.pipeline(transaction=False) as pipe:
                await self._mark_ready(pipe, key, BUSY_RETRY_SECONDS, unwatch=True)
                await pipe.execute()
            return Busy()
        # Empty: its watch entry stays for recovery to drop. Removing it here, a round
        # trip after the look, could unwatch a conversation admitted and taken meanwhile.
        del shard
        return None

    async def complete(self, taken: Taken) -> int:
        """The head is done: remove it, give the lease back, make the conversation ready
        again when more wait. Returns how many wait. One round trip: when deliveries
        waited behind it as it was taken, they still do (only the holder removes a head),
        so the conversation is made ready in the same pipeline; otherwise a second round
        trip only if some arrived meanwhile. Made ready, its ``taken`` entry goes with the
        same script (the ready index covers it now); else it is left to recovery, which
        drops it when due."""
        return (await self.complete_and_take(taken, None, look=False)).remaining

    async def complete_and_take(
        self, taken: Taken, tenant_id: str | None, *, look: bool
    ) -> Completed:
        """:meth:`complete`, then in the same round trip :meth:`take` for ``tenant_id``
        (one server only: :attr:`takes_with_completion`) and, with ``look``,
        :meth:`ready_tenants` as they are after that take."""
        keys = self._conversation_keys(taken.key)
        args = [taken.token, taken.uid]
        token = ""
        taking = tenant_id is not None and self._pop_and_take is not None
        async with self._redis.pipeline(transaction=False) as pipe:
            queue_script(pipe, self._complete, keys=keys, args=args)
            self._queue_notice(pipe, taken.uid)
            if taken.behind > 0:
                await self._mark_ready(pipe, taken.key, 0.0, unwatch=True)
            if taking and tenant_id is not None and self._pop_and_take is not None:
                token = self.new_token()
                index, take_args = self._pop_and_take_call(tenant_id, token)
                queue_script(pipe, self._pop_and_take, keys=index, args=take_args)
            if look:
                for shard in range(self._shards):
                    pipe.smembers(self._keys.fair_tenants(self._lane, shard))
            results = await pipe.execute()
        remaining = int(results[0][1])
        if taken.behind <= 0 and remaining > 0:
            async with self._redis.pipeline(transaction=False) as pipe:
                await self._mark_ready(pipe, taken.key, 0.0, unwatch=True)
                await pipe.execute()
        answer = self._answer(results[-1 - self._shards if look else -1], token) if taking else None
        tenants = _tenants(results[-self._shards :]) if look else None
        return Completed(remaining, answer, tenants)

    def _pop_and_take_call(self, tenant_id: str, token: str) -> tuple[list[str], list[EncodableT]]:
        now = _now_ms()
        args: list[EncodableT] = [
            tenant_id,
            now,
            now + self._ttl_ms,
            token,
            self._ttl_ms,
            *self._name_parts,
            now + int(BUSY_RETRY_SECONDS * 1000),
        ]
        return self._index_keys(tenant_id), args

    def _answer(self, answer: list[bytes | int] | None, token: str) -> Taken | Busy | None:
        """What ``_POP_AND_TAKE`` answered, as :meth:`take` returns it."""
        if not answer:
            return None
        key = parse_activity_member(_text(answer[1]))
        if answer[0] == 2:
            uid, held = decode_held(cast("bytes", answer[2]))
            return Taken(key, uid, held, token, int(answer[3]), int(answer[4]))
        return Busy() if answer[0] == 1 else None

    def _index_keys(self, tenant_id: str) -> list[str]:
        shard = self.shard(tenant_id)
        return [
            self._keys.fair_ready(self._lane, shard, tenant_id),
            self._keys.fair_tenants(self._lane, shard),
            self._keys.fair_taken(self._lane, shard),
        ]

    async def release(self, taken: Taken, *, delay: float = 0.0) -> None:
        """Give the lease back without completing (shutdown, a broker outage): the head is
        taken again, here or elsewhere, after ``delay`` seconds."""
        remaining = await self._release(
            keys=[self._keys.parked(taken.key), self._keys.lease(taken.key)], args=[taken.token]
        )
        if int(remaining) > 0:
            await self.make_ready(taken.key, delay=delay)

    def admitted_here(self, uid: str) -> bool:
        return uid.startswith(self._holder)

    def _queue_notice(self, pipe: AnyPipeline, uid: str) -> None:
        """Tell the delivery's admitter (another replica: it holds it unacked) that it is
        done; it acks it at its next look (:meth:`completions`). Nothing for our own."""
        if self.admitted_here(uid):
            return
        name = self._keys.fair_acks(uid[:ADMITTER_LENGTH])
        pipe.rpush(name, uid)
        pipe.expire(name, ACKS_TTL_SECONDS)

    async def completions(self) -> list[str]:
        """The uids of this replica's deliveries that another replica completed."""
        done = await self._redis.lpop(self._keys.fair_acks(self._holder), ACKS_BATCH)
        return [_text(uid) for uid in cast("list[bytes] | None", done) or []]

    async def retake(self, taken: Taken) -> bool:
        """Before a retry: whether ``taken`` is still ours to process (its lease held with
        its token, or free again while the delivery is still its conversation's head: then
        taken again with the same token). False: another holder has it, or it is done or
        gone; the taker must let it go without publishing anything."""
        keys = [
            self._keys.lease(taken.key),
            self._keys.parked_claims(taken.key),
            self._keys.parked(taken.key),
        ]
        return bool(await self._retake(keys=keys, args=[taken.token, self._ttl_ms, taken.uid]))

    async def audit(self, waiting: Mapping[ConversationKey, Sequence[str]]) -> Audit:
        """An admitter's look at its unanswered deliveries, by conversation: the uids Redis
        no longer has (to be admitted again, from the delivery RabbitMQ still holds), and
        conversations with deliveries that nobody holds and nothing would hand over
        (neither ready nor watched), which are made ready again here. Two round trips."""
        keys = list(waiting)
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                names = [
                    self._keys.parked(key),
                    self._keys.parked_claims(key),
                    self._keys.lease(key),
                ]
                queue_script(pipe, self._audit, keys=names, args=list(waiting[key]))
            looks = await pipe.execute()
        missing: list[str] = []
        unheld: list[ConversationKey] = []
        for key, (pttl, gone) in zip(keys, looks, strict=True):
            missing.extend(_text(uid) for uid in gone)
            if int(pttl) <= 0 and len(gone) < len(waiting[key]):
                unheld.append(key)
        if not unheld:
            return Audit(missing, 0)
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in unheld:
                shard = self.shard(key.tenant_id)
                pipe.zscore(
                    self._keys.fair_ready(self._lane, shard, key.tenant_id), self._member(key)
                )
                pipe.zscore(self._keys.fair_taken(self._lane, shard), self._member(key))
            scores = await pipe.execute()
        orphans = [
            k for n, k in enumerate(unheld) if scores[2 * n] is None and scores[2 * n + 1] is None
        ]
        if orphans:
            await self.make_ready(*orphans)
        return Audit(missing, len(orphans))

    async def recover(self) -> int:
        """Conversations whose taker died (its lease expired with deliveries left) become
        ready again; returns how many."""
        now = _now_ms()
        recovered = 0
        for shard in range(self._shards):
            while (found := await self._recover_batch(shard, now)) is not None:
                recovered += found
        return recovered

    async def _recover_batch(self, shard: int, now: int) -> int | None:
        """One batch of the shard's conversations due a look; None when none are due. On
        one server, the look and what follows are one script (``_RECOVER``); a cluster
        looks in one round trip and acts in the next (the admitters' audits repair what
        an admission between the two could leave unwatched)."""
        taken_key = self._keys.fair_taken(self._lane, shard)
        if self._recover is not None:
            head, tail, park, lease, _ = self._name_parts
            ready_prefix = self._keys.fair_ready(self._lane, shard, "t").removesuffix("t")
            due, readied = await self._recover(
                keys=[taken_key, self._keys.fair_tenants(self._lane, shard)],
                args=[now, RECOVER_BATCH, head, tail, park, lease, ready_prefix],
            )
            return None if int(due) == 0 else int(readied)
        due = await self._redis.zrangebyscore(taken_key, "-inf", now, start=0, num=RECOVER_BATCH)
        if not due:
            return None
        members = [_text(m) for m in due]
        conversations = [parse_activity_member(m) for m in members]
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in conversations:
                keys = [self._keys.parked(key), self._keys.lease(key)]
                queue_script(pipe, self._look, keys=keys, args=[])
            looks = await pipe.execute()
        recovered = 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for member, key, (waiting, pttl) in zip(members, conversations, looks, strict=True):
                if int(pttl) > 0:  # held: look again when its lease would lapse
                    pipe.zadd(taken_key, {member: now + int(pttl) + 1}, xx=True)
                    continue
                if int(waiting) > 0:
                    await self._mark_ready(pipe, key, 0.0)
                    recovered += 1
                pipe.zrem(taken_key, member)
            await pipe.execute()
        return recovered

    async def ready_count(self) -> int:
        """Conversations waiting for a free slot, over every tenant and shard."""
        tenants = await self.ready_tenants()
        async with self._redis.pipeline(transaction=False) as pipe:
            for tenant in tenants:
                pipe.zcard(self._keys.fair_ready(self._lane, self.shard(tenant), tenant))
            counts = await pipe.execute()
        return sum(int(c) for c in counts)

    async def _mark_ready(
        self, pipe: AnyPipeline, key: ConversationKey, delay: float, *, unwatch: bool = False
    ) -> None:
        """Queue the conversation's readiness; ``unwatch``: its ``taken`` entry goes in the
        same script (its holder completed it: the ready index covers it from then on)."""
        shard = self.shard(key.tenant_id)
        keys = [
            self._keys.fair_ready(self._lane, shard, key.tenant_id),
            self._keys.fair_tenants(self._lane, shard),
        ]
        if unwatch:
            keys.append(self._keys.fair_taken(self._lane, shard))
        queue_script(
            pipe,
            self._ready,
            keys=keys,
            args=[key.tenant_id, self._member(key), _now_ms() + int(delay * 1000)],
        )

    def _conversation_keys(self, key: ConversationKey) -> list[str]:
        return [self._keys.parked(key), self._keys.lease(key), self._keys.parked_claims(key)]

    @staticmethod
    def _member(key: ConversationKey) -> str:
        return activity_member(key)

    def _later(self) -> int:
        return _now_ms() + self._ttl_ms


BUSY_RETRY_SECONDS = 0.1


@dataclass(frozen=True)
class Audit:
    """What :meth:`RedisFairQueue.audit` found."""

    missing: list[str]
    """Uids of deliveries Redis no longer has."""
    orphans: int
    """Conversations found with deliveries, no holder and no watch or ready entry (made
    ready again)."""


def _tenants(sets: Sequence[object]) -> set[str]:
    """The tenants in the shards' ``tenants`` sets (SMEMBERS answers)."""
    return {_text(m) for members in sets for m in cast("set[bytes]", members)}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _conversation_name_parts(keys: RedisKeys) -> tuple[str, str, str, str, str]:
    """What ``_POP_AND_TAKE`` puts around ``tenant|user`` and the conversation id to name
    a conversation's park, lease and claims as ``RedisKeys`` does (checked here, so a
    change of the layout cannot go unnoticed)."""
    sample = ConversationKey("t", "u", "c")
    scope = keys.user_scope("t", "u")
    head, tail = scope.removesuffix("t|u}"), "}"
    names = (keys.parked(sample), keys.lease(sample), keys.parked_claims(sample))
    parts = tuple(name.removeprefix(scope).removesuffix("c") for name in names)
    if not scope.endswith("{t|u}") or any(
        f"{head}t|u{tail}{part}c" != name for part, name in zip(parts, names, strict=True)
    ):
        raise ValueError("the conversation's fair-queue keys are not named as expected")
    park, lease, claims = parts
    return head, tail, park, lease, claims
