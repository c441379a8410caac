"""``RedisMemoryStore`` keeps the ``MemoryStore`` contract on the real Redis
(``tests/support/memory_store_contract.py``; the same tests pin ``InMemoryMemoryStore``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_erasure import ErasureMarks
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_lease import RedisConversationLease
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.memory_store_contract import MemoryStoreContract, StoreUnderTest
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


class TestRedisMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def under_test(self, service_urls: ServiceUrls) -> AsyncIterator[StoreUnderTest]:
        client = aioredis.from_url(service_urls.redis_url)
        keys = RedisKeys(prefix=TEST_KEY_PREFIX)
        marks = ErasureMarks(client=client, keys=keys)
        yield StoreUnderTest(
            store=RedisMemoryStore(
                client=client,
                keys=keys,
                ttl_seconds=3600,
                trace_retention_seconds=3600,
                dedupe_ttl_seconds=3600,
            ),
            lease=RedisConversationLease(
                client=client, keys=keys, lease_seconds=30, max_wait_seconds=5
            ),
            begin_erasure=marks.begin,
            end_erasure=marks.end,
            key=ConversationKey("tcontract", new_id("u"), new_id("c")),
        )
        await client.aclose()
