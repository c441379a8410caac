"""The schedule of open tool rounds (SPEC 5.9): a sorted set of conversations by when
their calls time out, so the memory worker's sweep finds them without a scan and a
round never waits forever for a result that will not come.

One key outside any user's scope (``RedisKeys.tool_rounds``), like the activity set.
Written after the turn's commit (a crash in between is repaired by the redelivery, which
schedules again); entries whose round is no longer open are dropped by the sweep.
"""

from __future__ import annotations

from typing import cast

import redis.asyncio as aioredis

from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, parse_activity_member
from llm_bot.adapters.redis_progress import ZREM_IF_DUE
from llm_bot.memory.working import ConversationKey


@redis_failures_retryable
class RedisToolRounds:
    """Schedules, finds and drops the open tool rounds of conversations."""

    def __init__(self, *, client: aioredis.Redis, keys: RedisKeys) -> None:
        self._redis = client
        self._keys = keys
        self._drop_due = client.register_script(ZREM_IF_DUE)

    async def schedule(self, key: ConversationKey, deadline: float) -> None:
        await self._redis.zadd(self._keys.tool_rounds(), {activity_member(key): deadline})

    async def unschedule(self, key: ConversationKey) -> None:
        await self._redis.zrem(self._keys.tool_rounds(), activity_member(key))

    async def unschedule_due(self, key: ConversationKey, now: float) -> None:
        """Drop ``key`` only if still due by ``now``: a round opened meanwhile (scheduled
        later) keeps its entry."""
        await self._drop_due(keys=[self._keys.tool_rounds()], args=[activity_member(key), now])

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]:
        """Conversations whose open round's calls timed out by ``now``."""
        members = cast(
            "list[bytes]",
            await self._redis.zrangebyscore(
                self._keys.tool_rounds(), "-inf", now, start=0, num=limit
            ),
        )
        return [parse_activity_member(member.decode()) for member in members]
