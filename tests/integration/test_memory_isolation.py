"""Tenants never see each other's memory; erasure removes one user's keys and no others."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.checks import key_bytes
from tests.support.events import message_event, new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration


async def test_same_user_and_conversation_ids_in_two_tenants_are_isolated(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Tenant B's first turn sees nothing of tenant A's conversation with the same ids."""
    user, conv = new_id("u"), new_id("c")
    async with bot(make_settings()) as (service, client):
        await client.publish(
            message_event(
                tenant="tenant_a", user=user, conversation=conv, text="my secret code is 4711"
            )
        )
        first = await client.next_candidate()
        await client.publish(
            message_event(
                tenant="tenant_b", user=user, conversation=conv, text="what is my secret code?"
            )
        )
        second = await client.next_candidate()
        memory_b = await service.store.working_memory(ConversationKey("tenant_b", user, conv))
    assert (first.body["turn"], second.body["turn"]) == (1, 1)
    request_b = fake_model.chat_requests()[1]
    assert "4711" not in request_b.prompt_text()
    assert memory_b is not None
    assert all("4711" not in m.content for m in memory_b.messages)


async def test_memory_forget_erases_the_user_in_the_tenant_and_nothing_else(
    make_settings: Callable[..., Settings],
) -> None:
    """memory.forget with conversation '*' deletes every key of that user, only theirs."""
    user, other_user, conv = new_id("u"), new_id("u"), new_id("c")
    # Prefetch 1: the "sync" event after the forget is delivered only once the forget is
    # acked, so its reply means the erasure is done (with more in flight they overlap).
    async with bot(make_settings(prefetch=1)) as (service, client):
        for tenant, who in (("tf_a", user), ("tf_a", other_user), ("tf_b", user)):
            await client.publish(
                message_event(tenant=tenant, user=who, conversation=conv, text="remember me")
            )
            await client.next_candidate()
        prefix = service.settings.redis_key_prefix
        before = {key_bytes(k) for k in await service.redis.keys(f"{prefix}:*")}
        forget = message_event(
            tenant="tf_a", user=user, conversation="*", text=None, event_type="memory.forget"
        )
        await client.publish(forget)
        await client.publish(
            message_event(tenant="tf_b", user=user, conversation=new_id("c"), text="sync")
        )
        await client.next_candidate()
        after = {key_bytes(k) for k in await service.redis.keys(f"{prefix}:*")}
    erased = {k for k in before if k.startswith(f"{prefix}:{{tf_a|{user}}}".encode())}
    assert erased
    assert erased.isdisjoint(after)
    # Theirs: the same user id in the other tenant, the other user in the same tenant (the
    # prefix's global keys, the schedules' shards, are shared with tests running beside it).
    scopes = (f"{prefix}:{{tf_b|{user}}}".encode(), f"{prefix}:{{tf_a|{other_user}}}".encode())
    kept = {k for k in before if k.startswith(scopes) and not _in_flight_state(k)}
    assert kept
    assert kept <= after


def _in_flight_state(key: bytes) -> bool:
    """A conversation's processing state (its lease, its waiting deliveries): present
    only while an event of it is in progress, so a snapshot may catch it."""
    return any(part in key for part in (b":lease:", b":park:", b":parkn:"))
