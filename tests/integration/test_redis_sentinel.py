"""``REDIS_URL=redis+sentinel://...``: the service finds the master through Sentinel."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.entrypoints.redis_durability import check_redis_durability
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import conversation_event, new_id
from tests.support.harness import bot
from tests.support.redis_sentinel import sentinel_watching_a_master

pytestmark = pytest.mark.integration


async def test_a_conversation_through_a_master_found_by_sentinel(
    make_settings: Callable[..., Settings],
) -> None:
    key = ConversationKey("tsent", new_id("u"), new_id("c"))
    with sentinel_watching_a_master() as sentinel:
        settings = make_settings(redis_url=sentinel.url)
        async with bot(settings) as (service, client):
            for text in ("my code is 4711", "what is my code?"):
                await client.publish(conversation_event(key, text))
                reply = await client.next_candidate()
            memory = await service.store.working_memory(key)
            checked = await check_redis_durability(service.redis, settings.redis)
            where = (await service.redis.connection_pool.get_master_address())[1]  # type: ignore[union-attr]
    assert reply.body["turn"] == 2
    assert memory is not None
    assert [m.content for m in memory.messages if m.role == "user"][:2] == [
        "my code is 4711",
        "what is my code?",
    ]
    assert where == sentinel.master_port
    # Persistence and eviction read on the master Sentinel names, under its service's name.
    (master,) = checked.nodes
    assert master.node.startswith("sentinel:")
    assert (master.eviction_policy, master.durable) == ("noeviction", False)
