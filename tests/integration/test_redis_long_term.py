"""``RedisLongTermStore`` keeps the ``LongTermStore`` contract on the real Redis
(``tests/support/long_term_contract.py``; the same tests pin ``InMemoryLongTermStore``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.memory.retention import RetentionPolicy
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.long_term_contract import LongTermContract, LongTermUnderTest
from tests.support.redis_erasure_probes import erasure_probes
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


class TestRedisLongTermStore(LongTermContract):
    @pytest.fixture
    async def under_test(self, service_urls: ServiceUrls) -> AsyncIterator[LongTermUnderTest]:
        client = aioredis.from_url(service_urls.redis_url)
        keys = RedisKeys(prefix=TEST_KEY_PREFIX)
        generation, erase = erasure_probes(client, keys)

        yield LongTermUnderTest(
            store=RedisLongTermStore(client=client, keys=keys, retention=RetentionPolicy()),
            generation=generation,
            erase=erase,
            tenant="tcontract",
            user=new_id("u"),
        )
        await client.aclose()
