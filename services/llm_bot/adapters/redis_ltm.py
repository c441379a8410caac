"""Long-term memory in plain Redis: one hash per kind per tenant + user, plus the bundle.

``profile`` (key → attribute), ``facts``, ``episodes``, ``events`` (id → JSON item) and
``bundle`` (the pre-ranked selection ``recall`` loads in its one round trip). All keys
share the user's hash tag, so erasing a user erases their long-term memory too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from redis.exceptions import WatchError

from llm_bot.adapters.redis_connection import AnyPipeline, RedisClient
from llm_bot.adapters.redis_erasure import NO_ERASURE, current_generation
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, parse_user_member, user_member
from llm_bot.adapters.redis_schedules import RedisSchedule
from llm_bot.errors import ErasedMeanwhile, MemoryUnavailable
from llm_bot.memory.conversation_erasure import ConversationPruning, prune_conversation
from llm_bot.memory.fact_edits import FactRemoval, removal
from llm_bot.memory.long_term import (
    EpisodicSummary,
    LongTermBundle,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
)
from llm_bot.memory.retention import RetentionPlan, RetentionPolicy, plan_retention

Item = TypeVar("Item", bound=BaseModel)
Queue = Callable[[AnyPipeline], None]
"""Queues a transaction's writes on the pipeline (after its reads, before EXEC)."""


@redis_failures_retryable
class RedisLongTermStore:
    """Reads and writes one user's long-term memory."""

    def __init__(
        self,
        *,
        client: RedisClient,
        keys: RedisKeys,
        retention: RetentionPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._redis = client
        self._keys = keys
        self._retention = retention
        self._clock = clock
        self._schedule = RedisSchedule(client=client, keys=keys.retention_schedule())

    @property
    def retention(self) -> RetentionPolicy:
        """The policy ``apply_retention`` applies."""
        return self._retention

    async def profile(self, tenant_id: str, user_id: str) -> dict[str, ProfileAttribute]:
        raw = await self._hgetall(self._redis, self._keys.long_term(tenant_id, user_id, "profile"))
        return {k: ProfileAttribute.model_validate_json(v) for k, v in raw.items()}

    async def facts(self, tenant_id: str, user_id: str) -> list[SemanticFact]:
        return await self._items(self._redis, tenant_id, user_id, "facts", SemanticFact)

    async def episodes(self, tenant_id: str, user_id: str) -> list[EpisodicSummary]:
        return await self._items(self._redis, tenant_id, user_id, "episodes", EpisodicSummary)

    async def events(self, tenant_id: str, user_id: str) -> list[NotableEvent]:
        return await self._items(self._redis, tenant_id, user_id, "events", NotableEvent)

    async def bundle(self, tenant_id: str, user_id: str) -> LongTermBundle:
        raw = await self._redis.get(self._keys.long_term(tenant_id, user_id, "bundle"))
        return LongTermBundle.model_validate_json(raw) if raw else LongTermBundle()

    async def write(
        self,
        tenant_id: str,
        user_id: str,
        *,
        erasure: str,
        profile: Iterable[ProfileAttribute] = (),
        facts: Iterable[SemanticFact] = (),
        episodes: Iterable[EpisodicSummary] = (),
        events: Iterable[NotableEvent] = (),
    ) -> int:
        """Upsert items by id (idempotent), apply retention, rebuild the bundle; refused
        with ``ErasedMeanwhile`` if the user's erasure mark is no longer ``erasure``.

        Returns the number of items written."""
        groups: dict[str, dict[Any, Any]] = {  # redis-py wants its own key and value unions
            "profile": {a.key: a.model_dump_json() for a in profile},
            "facts": {f.id: f.model_dump_json() for f in facts},
            "episodes": {e.id: e.model_dump_json() for e in episodes},
            "events": {e.id: e.model_dump_json() for e in events},
        }

        async def upsert(pipe: AnyPipeline) -> Queue:
            def queue(pipe: AnyPipeline) -> None:
                for kind, mapping in groups.items():
                    if mapping:
                        pipe.hset(self._keys.long_term(tenant_id, user_id, kind), mapping=mapping)

            return queue

        await self._unless_erased(tenant_id, user_id, erasure, upsert)
        await self.apply_retention(tenant_id, user_id, erasure=erasure)  # TTLs, bundle, schedule
        return sum(len(mapping) for mapping in groups.values())

    async def apply_retention(self, tenant_id: str, user_id: str, *, erasure: str) -> RetentionPlan:
        """Evict past the age limits and beyond ``max_items`` per kind (``plan_retention``),
        rebuild the bundle, refresh the keys' TTL (the longest retention age: a user nobody
        sweeps still goes) and reschedule the user in the retention schedule for when their
        oldest remaining item ages out (unless the user's erasure mark is no longer
        ``erasure``). The items are read under the same WATCH as the write: a concurrent
        writer makes this fail as retryable ``MemoryUnavailable`` instead of rebuilding the
        bundle from a stale read. Returns what was evicted."""
        plan = RetentionPlan(evicted={}, bundle=LongTermBundle(), next_due=None)

        async def evict_and_rebuild(pipe: AnyPipeline) -> Queue:
            nonlocal plan
            profile, facts, episodes, events = await self._everything(pipe, tenant_id, user_id)
            plan = plan_retention(
                self._retention,
                now=self._clock(),
                profile=profile,
                facts=facts,
                episodes=episodes,
                events=events,
            )

            def queue(pipe: AnyPipeline) -> None:
                for kind, ids in plan.evicted.items():
                    pipe.hdel(self._keys.long_term(tenant_id, user_id, kind), *ids)
                ttl = (self._retention.longest_days + 1) * 86_400
                for name in self._item_keys(tenant_id, user_id):
                    pipe.expire(name, ttl)
                name = self._keys.long_term(tenant_id, user_id, "bundle")
                if plan.next_due is None:  # nothing left
                    pipe.unlink(name)
                else:
                    pipe.set(name, plan.bundle.model_dump_json(), ex=ttl)

            return queue

        watched = self._item_keys(tenant_id, user_id)
        await self._unless_erased(tenant_id, user_id, erasure, evict_and_rebuild, watch=watched)
        # The schedule lives in another slot, so after the transaction: a crash in between
        # fails the job, whose redelivery applies retention again and reschedules.
        member = user_member(tenant_id, user_id)
        if plan.next_due is None:
            await self._schedule.remove(member)
        else:
            await self._schedule.add(member, plan.next_due.timestamp())
        return plan

    async def due_count(self, now: float) -> int:
        """How many users are due for retention by ``now``."""
        return await self._schedule.due_count(now)

    async def due(self, now: float, limit: int = 100) -> list[tuple[str, str]]:
        """Users (tenant, user) whose oldest long-term item has aged out by ``now``."""
        return [parse_user_member(member) for member, _ in await self._schedule.due(now, limit)]

    async def forget_conversation(
        self, tenant_id: str, user_id: str, conversation_id: str
    ) -> ConversationPruning:
        """Take what ``conversation_id`` contributed out of long-term memory
        (:func:`prune_conversation`) and rebuild the bundle. Written under the user's
        current erasure generation, in one transaction over the long-term hashes."""
        erasure = await current_generation(self._redis, self._keys, tenant_id, user_id)
        pruning = ConversationPruning()

        async def prune(pipe: AnyPipeline) -> Queue:
            nonlocal pruning
            profile, facts, episodes, events = await self._everything(pipe, tenant_id, user_id)
            pruning = prune_conversation(
                conversation_id,
                profile={attribute.key: attribute for attribute in profile},
                facts=facts,
                episodes=episodes,
                events=events,
            )

            def queue(pipe: AnyPipeline) -> None:
                for kind, ids in pruning.deleted.items():
                    if ids:
                        pipe.hdel(self._keys.long_term(tenant_id, user_id, kind), *ids)
                if pruning.rewritten:
                    rewritten = {f.id: f.model_dump_json() for f in pruning.rewritten}
                    name = self._keys.long_term(tenant_id, user_id, "facts")
                    pipe.hset(name, mapping=cast("dict[Any, Any]", rewritten))

            return queue

        watched = self._item_keys(tenant_id, user_id)
        await self._unless_erased(tenant_id, user_id, erasure, prune, watch=watched)
        if pruning.count():  # the bundle and schedule only change when something did
            await self.apply_retention(tenant_id, user_id, erasure=erasure)
        return pruning

    async def remove_fact(
        self, tenant_id: str, user_id: str, fact_id: str, *, erasure: str
    ) -> FactRemoval:
        """Remove the current fact ``fact_id`` (:func:`removal`: a fact it had superseded is
        pointed past it) and rebuild the bundle, in one transaction over the long-term
        hashes; ``FactEditRefused`` when it is not a current fact, ``ErasedMeanwhile`` if the
        user's erasure mark is no longer ``erasure``."""
        done = FactRemoval(deleted=())

        async def remove(pipe: AnyPipeline) -> Queue:
            nonlocal done
            done = removal(
                await self._items(pipe, tenant_id, user_id, "facts", SemanticFact), fact_id
            )

            def queue(pipe: AnyPipeline) -> None:
                name = self._keys.long_term(tenant_id, user_id, "facts")
                pipe.hdel(name, *done.deleted)
                if done.rewritten:
                    rewritten = {f.id: f.model_dump_json() for f in done.rewritten}
                    pipe.hset(name, mapping=cast("dict[Any, Any]", rewritten))

            return queue

        watched = self._item_keys(tenant_id, user_id)
        await self._unless_erased(tenant_id, user_id, erasure, remove, watch=watched)
        await self.apply_retention(tenant_id, user_id, erasure=erasure)
        return done

    async def _everything(
        self, pipe: AnyPipeline, tenant_id: str, user_id: str
    ) -> tuple[
        list[ProfileAttribute], list[SemanticFact], list[EpisodicSummary], list[NotableEvent]
    ]:
        """Every long-term item of the user, read on the watching connection."""
        return (
            await self._items(pipe, tenant_id, user_id, "profile", ProfileAttribute),
            await self._items(pipe, tenant_id, user_id, "facts", SemanticFact),
            await self._items(pipe, tenant_id, user_id, "episodes", EpisodicSummary),
            await self._items(pipe, tenant_id, user_id, "events", NotableEvent),
        )

    def _item_keys(self, tenant_id: str, user_id: str) -> list[str]:
        return [
            self._keys.long_term(tenant_id, user_id, kind)
            for kind in ("profile", "facts", "episodes", "events")
        ]

    async def _unless_erased(
        self,
        tenant_id: str,
        user_id: str,
        erasure: str,
        plan: Callable[[AnyPipeline], Awaitable[Queue]],
        *,
        watch: Sequence[str] = (),
    ) -> None:
        """One MULTI/EXEC that WATCHes the user's erasure mark and ``watch``: ``plan`` reads
        on the watching connection and returns what to queue; nothing is written if the
        mark's generation is not ``erasure`` or a watched key changes before EXEC."""
        name = self._keys.erasure(tenant_id, user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            await pipe.watch(name, *watch)
            if await self._generation(pipe, name) != erasure:
                raise ErasedMeanwhile("long-term write refused: the user was erased meanwhile")
            queue = await plan(pipe)
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            queue(pipe)
            try:
                await pipe.execute()
            except WatchError as exc:
                # redis-py raises WatchError for a lost connection while watching too.
                if await self._generation(self._redis, name) != erasure:
                    raise ErasedMeanwhile(
                        "long-term write refused: the user was erased meanwhile"
                    ) from exc
                raise MemoryUnavailable(
                    "long-term memory changed meanwhile (or the connection was lost); retrying"
                ) from exc

    @staticmethod
    async def _generation(client: RedisClient | AnyPipeline, name: str) -> str:
        raw = await client.hget(name, "gen")
        return raw.decode() if isinstance(raw, bytes) else NO_ERASURE

    async def _items(
        self,
        client: RedisClient | AnyPipeline,
        tenant_id: str,
        user_id: str,
        kind: str,
        model: type[Item],
    ) -> list[Item]:
        raw = await self._hgetall(client, self._keys.long_term(tenant_id, user_id, kind))
        return [model.model_validate_json(value) for _, value in sorted(raw.items())]

    @staticmethod
    async def _hgetall(client: RedisClient | AnyPipeline, name: str) -> dict[str, bytes]:
        raw = cast("dict[bytes, bytes]", await client.hgetall(name))
        return {key.decode(): value for key, value in raw.items()}
