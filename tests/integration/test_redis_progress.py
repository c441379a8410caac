"""``RedisMemoryProgress`` keeps the ``MemoryProgress`` contract on the real Redis
(``tests/support/progress_contract.py``; the same tests pin ``InMemoryProgress``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_erasure import ErasureMarks
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.progress_contract import ProgressContract, ProgressUnderTest
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


class TestRedisMemoryProgress(ProgressContract):
    @pytest.fixture
    async def under_test(self, service_urls: ServiceUrls) -> AsyncIterator[ProgressUnderTest]:
        client = aioredis.from_url(service_urls.redis_url)
        # A prefix of the test's own: the idle sweep's activity set is one per prefix.
        keys = RedisKeys(prefix=f"{TEST_KEY_PREFIX}-{uuid.uuid4().hex[:8]}")
        marks = ErasureMarks(client=client, keys=keys)
        yield ProgressUnderTest(
            progress=RedisMemoryProgress(client=client, keys=keys, job_ttl_seconds=3600),
            begin_erasure=marks.begin,
            end_erasure=marks.end,
            key=ConversationKey("tcontract", new_id("u"), new_id("c")),
        )
        await client.aclose()
