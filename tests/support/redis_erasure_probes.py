"""What a contract test of a Redis adapter needs of the real erasure marks: read a user's
generation, and erase the user (begin and end), as the service does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from llm_bot.adapters.redis_erasure import ErasureMarks, current_generation
from llm_bot.adapters.redis_keys import RedisKeys

Generation = Callable[[str, str], Awaitable[str]]
Erase = Callable[[str, str], Awaitable[None]]


def erasure_probes(client: aioredis.Redis, keys: RedisKeys) -> tuple[Generation, Erase]:
    """``generation(tenant, user)`` and ``erase(tenant, user)`` on ``client``."""
    marks = ErasureMarks(client=client, keys=keys)

    async def generation(tenant_id: str, user_id: str) -> str:
        return await current_generation(client, keys, tenant_id, user_id)

    async def erase(tenant_id: str, user_id: str) -> None:
        await marks.end(tenant_id, user_id, await marks.begin(tenant_id, user_id))

    return generation, erase
