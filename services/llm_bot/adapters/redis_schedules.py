"""Schedules of conversations in Redis: a sorted set of conversations by when something is
due for them, so the memory worker's sweep finds them without a scan and nothing waits
forever. Two live side by side, outside any user's scope like the activity set:

- ``RedisKeys.tool_rounds``: conversations with an open tool round, by when its calls time
  out (SPEC 5.9; written after the turn's commit, a crash in between repaired by the
  redelivery, which schedules again);
- ``RedisKeys.flows``: conversations with a flow running, by when it expires (SPEC 5.10).

Entries whose reason went away are dropped by the sweep (``unschedule_due``).
"""

from __future__ import annotations

from typing import cast

import redis.asyncio as aioredis

from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import activity_member, parse_activity_member
from llm_bot.adapters.redis_progress import ZREM_IF_DUE
from llm_bot.memory.working import ConversationKey


@redis_failures_retryable
class RedisConversationSchedule:
    """Schedules, finds and drops conversations in one sorted set (``name``)."""

    def __init__(self, *, client: aioredis.Redis, name: str) -> None:
        self._redis = client
        self._name = name
        self._drop_due = client.register_script(ZREM_IF_DUE)

    async def schedule(self, key: ConversationKey, deadline: float) -> None:
        await self._redis.zadd(self._name, {activity_member(key): deadline})

    async def unschedule(self, key: ConversationKey) -> None:
        await self._redis.zrem(self._name, activity_member(key))

    async def unschedule_due(self, key: ConversationKey, now: float) -> None:
        """Drop ``key`` only if still due by ``now``: one scheduled again meanwhile (for
        later) keeps its entry."""
        await self._drop_due(keys=[self._name], args=[activity_member(key), now])

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]:
        """Conversations due by ``now``."""
        members = cast(
            "list[bytes]",
            await self._redis.zrangebyscore(self._name, "-inf", now, start=0, num=limit),
        )
        return [parse_activity_member(member.decode()) for member in members]
