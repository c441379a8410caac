"""Fair dispatch through the service, on real RabbitMQ and Redis (SPEC 4 "Fairness").

Each test puts a noisy tenant's backlog in the ingress queue *ahead* of a quiet tenant's
one event and checks where the quiet event's candidate lands among the noisy ones: without
fair dispatch it comes after nearly all of them (it waits behind them in the queue and in
the prefetch window); with it, after a few.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.redis_fair_queue import RedisFairQueue
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import encode, message_event, new_id
from tests.support.harness import Integrator, Received, bot

pytestmark = pytest.mark.integration

LATENCY = 0.05


async def _candidates_until_quiet(
    client: Integrator, *, noisy_total: int, within: float = 60.0
) -> tuple[int, list[Received]]:
    """All candidates until every noisy one and the quiet one arrived; returns how many
    noisy candidates came before the quiet one, and the noisy candidates."""
    noisy: list[Received] = []
    before_quiet: int | None = None
    async with asyncio.timeout(within):
        while len(noisy) < noisy_total or before_quiet is None:
            received = await client.candidates.get()
            if received.body["tenant_id"] == "quiet":
                before_quiet = len(noisy)
            else:
                noisy.append(received)
    return before_quiet, noisy


async def _publish_backlog(
    client: Integrator, conversations: list[ConversationKey], texts: list[str]
) -> None:
    """The noisy tenant's events (round-robin over ``conversations``), then one event of
    the quiet tenant behind them."""
    for n, text in enumerate(texts):
        key = conversations[n % len(conversations)]
        await client.publish(
            message_event(
                tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text=text
            )
        )
    await client.publish(
        message_event(tenant="quiet", user=new_id("u"), conversation=new_id("c"), text="hi")
    )


def _sample(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    return registry.get_sample_value(name, labels or {}) or 0.0


async def test_a_burst_in_one_conversation_does_not_hold_the_replicas_slots(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """40 events of one conversation queued ahead: the quiet tenant is answered after a
    few of them, not after all; the burst is answered in order, turns 1..40, nothing
    dead-lettered."""
    fake_model.set_latency(LATENCY)
    registry = CollectorRegistry()
    burst = ConversationKey("noisy", new_id("u"), new_id("c"))
    async with bot(make_settings(prefetch=4), registry=registry) as (_, client):
        await _publish_backlog(client, [burst], [f"burst {n}" for n in range(40)])
        before_quiet, noisy = await _candidates_until_quiet(client, noisy_total=40)
        assert client.errors.empty()
    assert before_quiet < 10, f"the quiet tenant waited behind {before_quiet} burst events"
    assert [c.body["turn"] for c in noisy] == list(range(1, 41))
    assert [c.body["text"] for c in noisy] == [f"echo: burst {n}" for n in range(40)]
    assert _sample(registry, "llmbot_events_waited_total", {"reason": "conversation_busy"}) >= 30
    assert _sample(registry, "llmbot_dwell_seconds_count") == 41
    assert _sample(registry, "llmbot_dead_letters_total", {"code": "internal"}) == 0


async def test_a_tenants_flood_takes_its_share_and_the_quiet_tenant_gets_through(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """One tenant floods 40 events over 20 conversations ahead of a quiet tenant's event:
    the quiet one is answered after a few flood events; every flood event is answered."""
    fake_model.set_latency(LATENCY)
    registry = CollectorRegistry()
    conversations = [ConversationKey("flood", new_id("u"), new_id("c")) for _ in range(20)]
    async with bot(make_settings(prefetch=4, tenant_max_in_flight=1), registry=registry) as (
        _,
        client,
    ):
        await _publish_backlog(client, conversations, [f"flood {n}" for n in range(40)])
        before_quiet, noisy = await _candidates_until_quiet(client, noisy_total=40)
        assert client.errors.empty()
    assert before_quiet < 20, f"the quiet tenant waited behind {before_quiet} flood events"
    assert sorted(c.body["text"] for c in noisy) == sorted(f"echo: flood {n}" for n in range(40))
    waited = _sample(registry, "llmbot_events_waited_total", {"reason": "tenant_over_share"})
    assert waited + _sample(registry, "llmbot_events_waited_total", {"reason": "no_slot"}) > 0


async def test_without_fair_dispatch_the_quiet_tenant_waits_behind_the_backlog(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The baseline the two tests above are measured against (LLM_BOT_FAIR_DISPATCH=false):
    one FIFO queue, so the quiet event waits behind nearly the whole burst."""
    fake_model.set_latency(LATENCY)
    burst = ConversationKey("noisy", new_id("u"), new_id("c"))
    async with bot(make_settings(prefetch=4, fair_dispatch=False)) as (_, client):
        await _publish_backlog(client, [burst], [f"burst {n}" for n in range(20)])
        before_quiet, _ = await _candidates_until_quiet(client, noisy_total=20)
    assert before_quiet >= 15


async def test_a_delivery_whose_taker_died_is_recovered_and_answered_once(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A replica took a conversation and died (its lease lapses, nothing completed): the
    running service makes it ready again and answers its event, then the one behind it."""
    settings = make_settings(lease_seconds=1)
    key = ConversationKey("t1", new_id("u"), new_id("c"))
    first, second = (
        message_event(
            tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text=t
        )
        for t in ("one", "two")
    )
    async with bot(settings) as (service, client):
        dead = RedisFairQueue(
            client=service.redis,
            keys=RedisKeys(prefix=settings.redis_key_prefix),
            lane=settings.ingress_queue,
            lease_seconds=settings.lease_seconds,
        )
        await dead.admit(
            [
                (key, HeldMessage(body=encode(first), message_id=first["id"]), dead.new_token()),
                (key, HeldMessage(body=encode(second), message_id=second["id"]), None),
            ]
        )
        answered = [await client.next_candidate(within=10) for _ in range(2)]
        await asyncio.sleep(0.3)
        assert client.candidates.empty()
    assert [c.body["event_id"] for c in answered] == [first["id"], second["id"]]
    assert [c.body["turn"] for c in answered] == [1, 2]
    assert len(fake_model.chat_requests()) == 2
