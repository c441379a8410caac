"""Holders of one lease in one process queue in the process, and only the first asks
Redis (``adapters/redis_lease.RedisConversationLease``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_lease import RedisConversationLease
from llm_bot.errors import ConversationBusy
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


class CountingRedis(aioredis.Redis):
    """A client that counts its ``SET`` commands (a lease's every attempt is one)."""

    sets = 0

    async def set(self, *args: Any, **kwargs: Any) -> Any:
        type(self).sets += 1
        return await super().set(*args, **kwargs)


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[CountingRedis]:
    pool = aioredis.ConnectionPool.from_url(service_urls.redis_url)
    redis = CountingRedis(connection_pool=pool)
    CountingRedis.sets = 0
    yield redis
    await redis.aclose()
    await pool.aclose()


def lease(client: aioredis.Redis, max_wait: float = 5.0) -> RedisConversationLease:
    return RedisConversationLease(
        client=client,
        keys=RedisKeys(prefix=TEST_KEY_PREFIX),
        lease_seconds=30,
        max_wait_seconds=max_wait,
    )


async def test_holders_in_one_process_take_turns_without_polling(client: CountingRedis) -> None:
    """Four holders of one user's lease at once hold it one after the other, first come
    first served, with one ``SET`` each: none polls Redis while another holds it."""
    leases = lease(client)
    key = ConversationKey("tlease", new_id("u"), "*")
    order: list[int] = []
    holding = 0

    async def hold(n: int) -> None:
        nonlocal holding
        async with leases.hold(key):
            holding += 1
            assert holding == 1
            order.append(n)
            await asyncio.sleep(0.05)  # past the first polls' pause (POLL_MIN_SECONDS)
            holding -= 1

    await asyncio.gather(*(hold(n) for n in range(4)))
    assert order == [0, 1, 2, 3]
    assert CountingRedis.sets == 4


async def test_a_holder_waiting_in_the_process_gives_up_at_its_wait(
    client: CountingRedis,
) -> None:
    """The wait behind this process's holder counts against ``max_wait_seconds`` like a
    wait in Redis: past it, ``ConversationBusy``; the lease is free again afterwards."""
    leases = lease(client, max_wait=0.2)
    key = ConversationKey("tlease", new_id("u"), new_id("c"))
    async with leases.hold(key):
        with pytest.raises(ConversationBusy):
            async with leases.hold(key):
                pytest.fail("held twice at once")
    async with leases.hold(key):
        pass
    assert CountingRedis.sets == 2
