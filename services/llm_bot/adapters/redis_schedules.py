"""Schedules in Redis: sorted sets of members by when something is due for them, so the
memory worker's sweeps find them without a scan and nothing waits forever. Four live side
by side, outside any user's scope (``RedisKeys``):

- ``activity``: conversations by last activity (the idle sweep finalizes them);
- ``retention``: users by when their oldest long-term item ages out;
- ``tool_rounds``: conversations with an open tool round, by when its calls time out
  (SPEC 5.9; written after the turn's commit, a crash in between repaired by the
  redelivery, which schedules again);
- ``flows``: conversations with a flow running, by when it expires (SPEC 5.10).

Each is sharded (``ScheduleKeys``): a member's writes go to its shard, and every read (what
is due, how many) reads every shard in one pipeline: on a Redis Cluster one round trip per
node holding shards. Entries whose reason went away are dropped by the sweep
(``remove_if_due``).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable
from typing import cast

from llm_bot.adapters.redis_connection import AnyPipeline, RedisClient, queue_script
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import ScheduleKeys, activity_member, parse_activity_member
from llm_bot.memory.conversation_key import ConversationKey

ZREM_IF_DUE = """
-- Remove member ARGV[1] from sorted set KEYS[1] only if its score is still <= ARGV[2]
-- (a later score means someone rescheduled it meanwhile: keep it).
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""


@redis_failures_retryable
class RedisSchedule:
    """One sharded schedule: add, remove, and read what is due across its shards."""

    def __init__(self, *, client: RedisClient, keys: ScheduleKeys) -> None:
        self._redis = client
        self._keys = keys
        self._drop_due = client.register_script(ZREM_IF_DUE)

    def queue_add(self, pipe: AnyPipeline, member: str, at: float, *, later: bool) -> None:
        """Queue the member's (re)scheduling in ``pipe``; ``later`` only moves it later
        (ZADD GT), never earlier."""
        pipe.zadd(self._keys.of(member), {member: at}, gt=later)

    async def add(self, member: str, at: float, *, later: bool = False) -> None:
        await self._redis.zadd(self._keys.of(member), {member: at}, gt=later)

    def queue_remove(self, pipe: AnyPipeline, members: Iterable[str]) -> None:
        """Queue the members' removal from their shards and the legacy set."""
        by_shard: dict[str, list[str]] = defaultdict(list)
        for member in members:
            by_shard[self._keys.of(member)].append(member)
        for name, group in by_shard.items():
            pipe.zrem(name, *group)
            pipe.zrem(self._keys.legacy, *group)

    async def remove(self, *members: str) -> None:
        if members:
            async with self._redis.pipeline(transaction=False) as pipe:
                self.queue_remove(pipe, members)
                await pipe.execute()

    async def remove_if_due(self, member: str, at: float) -> bool:
        """Drop ``member`` only if still due by ``at``: one scheduled again meanwhile (for
        later) keeps its entry. True if it was dropped."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in (self._keys.of(member), self._keys.legacy):
                queue_script(pipe, self._drop_due, keys=[name], args=[member, at])
            dropped = cast("list[int]", await pipe.execute())
        return any(dropped)

    async def due(self, now: float, limit: int = 100) -> list[tuple[str, float]]:
        """Up to ``limit`` members due by ``now``, the most overdue first, over every
        shard."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in self._keys.every:
                pipe.zrangebyscore(name, "-inf", now, start=0, num=limit, withscores=True)
            shards = cast("list[list[tuple[bytes, float]]]", await pipe.execute())
        rows = heapq.nsmallest(
            limit, (row for rows in shards for row in rows), key=lambda row: row[1]
        )
        return [(member.decode(), float(score)) for member, score in rows]

    async def due_count(self, now: float) -> int:
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in self._keys.every:
                pipe.zcount(name, "-inf", now)
            return sum(cast("list[int]", await pipe.execute()))


@redis_failures_retryable
class RedisConversationSchedule:
    """Schedules, finds and drops conversations in one schedule (tool rounds, flows)."""

    def __init__(self, *, client: RedisClient, keys: ScheduleKeys) -> None:
        self._schedule = RedisSchedule(client=client, keys=keys)

    async def schedule(self, key: ConversationKey, deadline: float) -> None:
        await self._schedule.add(activity_member(key), deadline)

    async def unschedule(self, key: ConversationKey) -> None:
        await self._schedule.remove(activity_member(key))

    async def unschedule_due(self, key: ConversationKey, now: float) -> None:
        """Drop ``key`` only if still due by ``now``: one scheduled again meanwhile (for
        later) keeps its entry."""
        await self._schedule.remove_if_due(activity_member(key), now)

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]:
        """Conversations due by ``now``."""
        return [parse_activity_member(m) for m, _ in await self._schedule.due(now, limit)]
