"""Tenants' token budgets (``LLM_BOT_TENANT_TOKEN_BUDGETS``) against real RabbitMQ and
Redis, with the fake model reporting usage: the bus, the memory worker and the gateway."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import openai
import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_token_ledger import RedisTokenLedger
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.idle_sweep import sweep_once
from tests.support.events import message_event, new_id
from tests.support.gateway import gateway_settings, running_gateway, sdk_client
from tests.support.harness import TEST_KEY_PREFIX, Integrator, bot, running_worker
from tests.support.harness import settings_for_test as harness_settings
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


def own_prefix() -> str:
    """A Redis prefix of this test alone (budget counters are per tenant and day), removed
    with the session's keys."""
    return f"{TEST_KEY_PREFIX}-{uuid.uuid4().hex[:6]}"


async def spent(settings: Settings, redis: Any, tenant: str) -> int:
    ledger = RedisTokenLedger(client=redis, keys=RedisKeys(prefix=settings.redis_key_prefix))
    return (await ledger.spent(tenant, datetime.now(UTC)))["day"]


async def answer(client: Integrator, key: ConversationKey, text: str) -> dict[str, Any]:
    """Publish a message; its candidate or its error, whichever comes."""
    await client.publish(
        message_event(
            tenant=key.tenant_id, user=key.user_id, conversation=key.conversation_id, text=text
        )
    )
    candidate = asyncio.ensure_future(client.candidates.get())
    error = asyncio.ensure_future(client.errors.get())
    done, pending = await asyncio.wait(
        {candidate, error}, timeout=15, return_when="FIRST_COMPLETED"
    )
    for task in pending:
        task.cancel()
    assert done, "neither a candidate nor an error came"
    return done.pop().result().body


async def test_a_tenant_is_answered_until_its_cap_then_refused_while_another_goes_on(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Replies until the day's budget is spent (the last one started under the cap), then
    ErrorV1 ``budget_exceeded`` without a model call or a dead letter; another tenant is
    answered all along."""
    small, other = new_id("shop"), new_id("shop")
    settings = make_settings(
        redis_key_prefix=own_prefix(), tenant_token_budgets=f"{small}=120/day,*=1000000/day"
    )
    registry = CollectorRegistry()
    small_key = ConversationKey(small, new_id("u"), new_id("c"))
    other_key = ConversationKey(other, new_id("u"), new_id("c"))
    usages: list[int] = []
    async with bot(settings, registry=registry) as (service, client):
        refusal: dict[str, Any] | None = None
        for turn in range(30):
            reply = await answer(client, small_key, f"question number {turn} about my order")
            if reply["schema"] == "llmbot.error.v1":
                refusal = reply
                break
            usages.append(reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"])
            assert (await answer(client, other_key, f"hello {turn}"))["schema"] == "candidate.v1"
        assert refusal is not None, "the small budget was never reached"
        calls_before = len(fake_model.chat_requests())
        again = await answer(client, small_key, "and now?")
        still = await answer(client, other_key, "and me?")
        counted = await spent(settings, service.redis, small)
        dead_letters = await client.queue_depth(settings.dlq)
        ingress = await client.ingress_depth()
    assert refusal["code"] == again["code"] == "budget_exceeded"
    assert refusal["tenant_id"] == small
    assert still["schema"] == "candidate.v1"
    assert len(fake_model.chat_requests()) == calls_before + 1  # only the other tenant's
    assert len(usages) >= 2
    assert counted == sum(usages)  # every reply's usage, nothing for the refusals
    assert sum(usages) >= 120  # refused only once the cap was reached
    assert sum(usages) - usages[-1] < 120  # the last reply started under it
    assert dead_letters == 0
    assert ingress == 0
    refused = registry.get_sample_value("llmbot_events_total", {"outcome": "refused"})
    assert refused == 2
    assert registry.get_sample_value("llmbot_tenant_tokens_total", {"tenant": small}) == sum(usages)
    ratio = registry.get_sample_value(
        "llmbot_tenant_budget_used_ratio", {"tenant": small, "period": "day"}
    )
    assert ratio == pytest.approx(sum(usages) / 120)
    assert registry.get_sample_value("llmbot_budget_refusals_total", {"tenant": small}) == 2


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


def memory_settings(urls: ServiceUrls, model: FakeModelServer, budgets: str) -> Settings:
    return harness_settings(
        urls,
        model.base_url,
        memory_max_messages=4,
        retry_base_seconds=0.05,
        redis_key_prefix=own_prefix(),
        tenant_token_budgets=budgets,
    )


async def settled(client: Integrator, within: float = 60.0) -> None:
    """Wait until the memory queue is empty and stays empty (the worker caught up)."""
    quiet = 0
    async with asyncio.timeout(within):
        while quiet < 5:
            depth = await client.queue_depth(client.settings.memory_queue)
            quiet = quiet + 1 if depth == 0 else 0
            await asyncio.sleep(0.1)


async def test_the_memory_workers_calls_count_against_the_tenants_budget(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> None:
    """Classification and summaries are the tenant's spend too: the counter holds more
    than the replies' usage once the worker compacted."""
    tenant = new_id("shop")
    settings = memory_settings(service_urls, memory_model, f"{tenant}=10000000/day")
    key = ConversationKey(tenant, new_id("u"), new_id("c"))
    replies = 0
    async with bot(settings) as (service, client), running_worker(settings):
        for turn in range(6):
            reply = await answer(client, key, f"my order number {turn} has not arrived")
            replies += reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"]
        await settled(client)
        counted = await spent(settings, service.redis, tenant)
    summaries = [r for r in memory_model.chat_requests() if schema_name(r) == "memory_compaction"]
    assert summaries, "the worker never summarized: nothing to count"
    assert counted > replies


async def test_a_job_of_a_tenant_over_budget_is_deferred_not_dead_lettered(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> None:
    """Over budget, the worker makes no summarizer call: the job is acked (outcome
    refused), nothing reaches the memory DLQ, and every turn stays in the raw trace."""
    tenant = new_id("shop")
    settings = memory_settings(service_urls, memory_model, f"{tenant}=150/day")
    key = ConversationKey(tenant, new_id("u"), new_id("c"))
    registry = CollectorRegistry()
    answered = 0
    async with bot(settings) as (_, client):
        for turn in range(30):  # no worker yet: its jobs wait in the memory queue
            reply = await answer(client, key, f"my order number {turn} has not arrived")
            if reply["schema"] == "llmbot.error.v1":
                break
            answered += 1
        assert answered >= 3, "too few turns for anything to compact"
        async with running_worker(settings, registry=registry) as worker:
            await settled(client)
            await sweep_once(  # the idle conversation's finalization: deferred as well
                progress=worker.progress,
                publish=worker.consumer.publish_job,
                idle_seconds=0,
                now=datetime.now(UTC).timestamp() + 1,
            )
            await settled(client)
            memory_dead_letters = await client.queue_depth(settings.memory_dlq)
            trace = await worker.progress.trace_turns(key, 1, answered)
            progress = await worker.progress.load(key)
    summaries = [r for r in memory_model.chat_requests() if schema_name(r) == "memory_compaction"]
    assert summaries == []
    assert memory_dead_letters == 0
    assert registry.get_sample_value("llmbot_events_total", {"outcome": "refused"})
    assert {m.turn for m in trace} == set(range(1, answered + 1))
    assert progress.compacted_through == 0


async def test_the_gateway_answers_429_insufficient_quota_before_publishing(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A tenant whose budget is spent gets OpenAI's insufficient_quota from the gateway
    itself (no event reaches the service); another tenant is answered."""
    budgets = "tenant_a=1/day"  # the first request starts under it, the second not
    settings = gateway_settings(
        make_settings, redis_key_prefix=own_prefix(), tenant_token_budgets=budgets
    )
    service_registry, gateway_registry = CollectorRegistry(), CollectorRegistry()
    async with (
        bot(settings, registry=service_registry),
        running_gateway(settings, registry=gateway_registry) as gateway,
    ):
        first, other = sdk_client(gateway), sdk_client(gateway, tenant="tenant_b")
        conversation = {"conversation_id": new_id("c")}
        reply = await first.chat.completions.create(
            model="llm-bot",
            messages=[{"role": "user", "content": "hi"}],
            user="u1",
            metadata=conversation,
        )
        assert reply.choices[0].message.content
        with pytest.raises(openai.RateLimitError) as refused:
            await first.chat.completions.create(
                model="llm-bot",
                messages=[{"role": "user", "content": "again"}],
                user="u1",
                metadata=conversation,
            )
        answered = await other.chat.completions.create(
            model="llm-bot",
            messages=[{"role": "user", "content": "hi"}],
            user="u2",
            metadata={"conversation_id": new_id("c")},
        )
        await first.close()
        await other.close()
    assert refused.value.status_code == 429
    assert refused.value.code == "insufficient_quota"
    assert refused.value.type == "insufficient_quota"
    assert answered.choices[0].message.content
    assert len(fake_model.chat_requests()) == 2
    assert service_registry.get_sample_value("llmbot_events_total", {"outcome": "refused"}) == 0
    assert (
        gateway_registry.get_sample_value("llmbot_budget_refusals_total", {"tenant": "tenant_a"})
        == 1
    )
    status = {"status": "429", "stream": "false"}
    assert gateway_registry.get_sample_value("llmbot_gateway_requests_total", status) == 1
