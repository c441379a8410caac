"""Whole conversations through the broker, for the memory tests: say some messages, end
the conversation, wait until the memory worker finalized it."""

from __future__ import annotations

import asyncio

from llm_bot.bootstrap import Service
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import message_event
from tests.support.harness import Integrator


async def say_and_end(client: Integrator, key: ConversationKey, texts: list[str]) -> list[str]:
    """Say ``texts`` in ``key`` (each answered), then end it; returns the events' ids."""
    ids = []
    for text in texts:
        event = message_event(
            tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text=text
        )
        await client.publish(event)
        await client.next_candidate()
        ids.append(str(event["id"]))
    await client.publish(
        message_event(
            tenant=key.tenant_id,
            user=key.user_id,
            conversation=key.conversation_id,
            text=None,
            event_type="conversation.end",
        )
    )
    return ids


async def finalized(
    service: Service, client: Integrator, key: ConversationKey, within: float = 60
) -> None:
    """Wait until ``key`` was finalized (its working memory is gone) and the memory queue
    stays empty for five polls (the worker caught up)."""
    async with asyncio.timeout(within):
        while await service.store.working_memory(key) is not None:
            await asyncio.sleep(0.1)
        quiet = 0
        while quiet < 5:
            depth = await client.queue_depth(client.settings.memory_queue)
            quiet = quiet + 1 if depth == 0 else 0
            await asyncio.sleep(0.1)
