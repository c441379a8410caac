"""``RedisFlowCheckpoints`` keeps the ``FlowCheckpoints`` contract on the real Redis
(``tests/support/flow_checkpoints_contract.py``; the same tests pin
``InMemoryFlowCheckpoints``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_flow_checkpoints import RedisFlowCheckpoints
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.flow_checkpoints_contract import CheckpointsUnderTest, FlowCheckpointsContract
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.redis_erasure_probes import erasure_probes
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


class TestRedisFlowCheckpoints(FlowCheckpointsContract):
    @pytest.fixture
    async def under_test(self, service_urls: ServiceUrls) -> AsyncIterator[CheckpointsUnderTest]:
        client = aioredis.from_url(service_urls.redis_url)
        keys = RedisKeys(prefix=TEST_KEY_PREFIX)
        generation, erase = erasure_probes(client, keys)

        yield CheckpointsUnderTest(
            checkpoints=RedisFlowCheckpoints(client=client, keys=keys, ttl_seconds=3600),
            generation=generation,
            erase=erase,
            key=ConversationKey("tcontract", new_id("u"), new_id("c")),
        )
        await client.aclose()
