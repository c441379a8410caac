"""The sharded schedules (``redis_schedules.py``) on a real Redis: what is due is read
across every shard, most overdue first, and entries left under the unsharded name of
earlier releases are still found and drained."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from llm_bot.adapters.redis_connection import RedisClient, connect_redis
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_schedules import RedisSchedule
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[RedisClient]:
    redis = connect_redis(service_urls.redis_url)
    yield redis
    await redis.aclose()


async def test_due_reads_every_shard_and_the_legacy_set(client: RedisClient) -> None:
    keys = RedisKeys(prefix=f"{TEST_KEY_PREFIX}-sched-{uuid.uuid4().hex[:6]}").activity()
    schedule = RedisSchedule(client=client, keys=keys)
    members = [f"t|user{n}|c" for n in range(40)]
    for n, member in enumerate(members):
        await schedule.add(member, 1000.0 + n)
    await client.zadd(keys.legacy, {"t|old|c": 999.0})  # written by an earlier release
    assert len({keys.of(m) for m in members}) > 1

    assert await schedule.due_count(now=1019.0) == 21
    due = await schedule.due(now=2000.0, limit=5)
    assert due == [("t|old|c", 999.0), *((members[n], 1000.0 + n) for n in range(4))]

    assert await schedule.remove_if_due("t|old|c", 999.0)
    assert not await schedule.remove_if_due(members[0], 999.0)  # rescheduled later: kept
    await schedule.add(members[1], 500.0, later=True)  # GT: never earlier
    await schedule.remove(members[2], members[3])
    left = [member for member, _ in await schedule.due(now=2000.0, limit=100)]
    assert left == [members[0], members[1], *members[4:]]
