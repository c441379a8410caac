"""Start-up checks that turn an unreachable dependency into one clear line."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import RedisError


class DependencyUnavailable(Exception):
    """A service llm-bot needs is not reachable at start; ``str()`` says which and how."""


async def check_redis(client: aioredis.Redis) -> None:
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise DependencyUnavailable(
            f"Redis is not reachable at REDIS_URL ({type(exc).__name__}); start Redis or set "
            "REDIS_URL"
        ) from exc


async def redis_readiness(client: aioredis.Redis) -> str | None:
    """Readiness check: None when Redis answers PING."""
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        return f"redis unavailable: {type(exc).__name__}"
    return None
