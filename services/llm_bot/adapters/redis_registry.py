"""The user's key registry: erasure in O(that user), not a SCAN of the keyspace.

Keys with ids in their names (a conversation's ``wm``/``meta``/``trace``, an event's
``evt`` record, a memory job's ``job`` marker) are recorded, as they are written, in one
sorted set per user (``RedisKeys.registry``): member the key's name, score the Unix time
it expires at. The scripts that write such keys call ``register`` in the same atomic
step, so no key exists unregistered. Each registration also drops the entries that
expired, so the registry holds about as many names as the user has live keys. Keys with
fixed names (long-term memory, the retrieval index) need no entry: erasure knows them.

Memory recorded before the registry existed is registered by ``llm-bot memory reindex``
(``backfill``), once after upgrading.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import cast

from llm_bot.adapters.redis_connection import RedisClient

REGISTER_LUA = """
local function register_all(registry, entries)
  local now = tonumber(redis.call('TIME')[1])
  local scored, longest = {}, 0
  for i = 1, #entries, 2 do
    local ttl = tonumber(entries[i + 1])
    scored[#scored + 1] = now + ttl
    scored[#scored + 1] = entries[i]
    if ttl > longest then longest = ttl end
  end
  redis.call('ZADD', registry, 'GT', unpack(scored))
  redis.call('ZREMRANGEBYSCORE', registry, '-inf', now - 1)
  if redis.call('TTL', registry) < longest then
    redis.call('EXPIRE', registry, longest)
  end
end
local function register(registry, name, ttl)
  register_all(registry, {name, ttl})
end
"""
"""Lua ``register(registry, name, ttl_seconds)`` and ``register_all(registry, {name,
ttl_seconds, ...})`` (several names in one ZADD, the expired entries dropped and the
registry's TTL checked once): prepend to a script that writes keys."""


async def registered(client: RedisClient, registry: str) -> list[str]:
    """Every name in the registry (expired ones included: unlinking them is a no-op)."""
    names = cast("list[bytes]", await client.zrange(registry, 0, -1))
    return [name.decode() for name in names]


async def backfill(
    client: RedisClient, registry: str, pattern: str, *, fixed: Collection[str]
) -> int:
    """Register the keys matching ``pattern`` (one user's) but the ``fixed`` names (which
    erasure knows, or keeps: the erasure mark); returns how many were added. For memory
    written before the registry existed."""
    now = int(time.time())
    added = 0
    async for raw in client.scan_iter(match=pattern, count=500):
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if name == registry or name in fixed:
            continue
        ttl = int(await client.ttl(name))
        score = now + ttl if ttl > 0 else now + 10 * 365 * 86400  # no TTL: keep it listed
        added += int(await client.zadd(registry, {name: score}, gt=True) or 0)
    return added
