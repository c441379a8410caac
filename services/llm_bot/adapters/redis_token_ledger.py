"""Tokens each tenant's model calls spent, per UTC day and UTC month, in Redis.

One counter per tenant and period (``RedisKeys.token_spend``), each its own hash tag: a
Redis Cluster spreads them, and no command touches two keys. Adding a call's tokens is one
pipelined round trip: ``INCRBY`` and ``EXPIRE`` of the day's key, then of the month's (on a
cluster, one per node holding them). A counter lives ``*_TTL_SECONDS`` after its last
write, longer than its period, so it is never reset while its period runs.
"""

from __future__ import annotations

from datetime import datetime

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.token_budgets import PERIODS, Period, period_id

DAY_TTL_SECONDS = 2 * 86_400
MONTH_TTL_SECONDS = 35 * 86_400
_TTL: dict[Period, int] = {"day": DAY_TTL_SECONDS, "month": MONTH_TTL_SECONDS}


@redis_failures_retryable
class RedisTokenLedger:
    """The ``TokenLedger`` port on Redis counters."""

    def __init__(self, *, client: RedisClient, keys: RedisKeys) -> None:
        self._redis = client
        self._keys = keys

    def _key(self, tenant_id: str, period: Period, at: datetime) -> str:
        return self._keys.token_spend(tenant_id, period_id(period, at))

    async def add(self, tenant_id: str, tokens: int, at: datetime) -> dict[Period, int]:
        """Add ``tokens`` to the tenant's day and month; their new totals."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for period in PERIODS:
                key = self._key(tenant_id, period, at)
                pipe.incrby(key, tokens)
                pipe.expire(key, _TTL[period])
            replies = await pipe.execute()
        return {period: int(replies[2 * n]) for n, period in enumerate(PERIODS)}

    async def spent(self, tenant_id: str, at: datetime) -> dict[Period, int]:
        """The tenant's totals for the day and the month ``at`` falls in."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for period in PERIODS:
                pipe.get(self._key(tenant_id, period, at))
            replies = await pipe.execute()
        return {period: int(replies[n] or 0) for n, period in enumerate(PERIODS)}
