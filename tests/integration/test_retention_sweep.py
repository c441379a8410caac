"""Retention without writes (SPEC 5.5): a user who stopped talking still loses what aged
out, found through the retention schedule (no SCAN), index entries included; long-term
keys carry a TTL refreshed on write; profile attributes age out on their own clock."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from llm_bot.adapters.redis_erasure import NO_ERASURE
from llm_bot.adapters.redis_keys import RedisKeys, user_member
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.bootstrap import Worker
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import ProfileAttribute, SemanticFact
from llm_bot.memory.recall_items import LONG_TERM_PREFIX
from llm_bot.memory.retention import RetentionPolicy
from llm_bot.service.retention_sweep import RetentionSweep
from tests.support.events import message_event, new_id
from tests.support.harness import TEST_KEY_PREFIX, bot, running_worker, settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

DAY = 86_400
POLICY = RetentionPolicy(max_items=1000, max_age_days=365, profile_max_age_days=30)


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


def own_prefix() -> str:
    """A key prefix of this test alone: the retention schedule is one key per prefix, and
    a sweep a year ahead would otherwise take every other test's users too (still under
    the session's prefix, so the session's cleanup removes it)."""
    return f"{TEST_KEY_PREFIX}.{uuid.uuid4().hex[:8]}"


def store_at(worker: Worker, when: datetime) -> RedisLongTermStore:
    """The worker's long-term store with the clock at ``when`` and :data:`POLICY`."""
    keys = RedisKeys(prefix=worker.settings.redis_key_prefix)
    return RedisLongTermStore(client=worker.redis, keys=keys, retention=POLICY, clock=lambda: when)


def sweep_at(worker: Worker, when: datetime) -> RetentionSweep:
    return RetentionSweep(
        ltm=store_at(worker, when),
        marks=worker.progress,
        index=worker.indexer,
        metrics=worker.base.metrics,
    )


async def long_term_entries(worker: Worker, tenant: str, user: str) -> int:
    return len(await worker.base.index.digests(tenant, user, LONG_TERM_PREFIX))


def fact(fact_id: str, at: datetime) -> SemanticFact:
    return SemanticFact(
        id=fact_id,
        fact=f"The user owns item {fact_id}.",
        confidence=0.9,
        salience=0.5,
        created_at=at.isoformat(),
        updated_at=at.isoformat(),
    )


async def test_an_idle_users_memory_ages_out_without_a_write(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    settings: Settings = settings_for_test(
        service_urls, model.base_url, retry_base_seconds=0.05, redis_key_prefix=own_prefix()
    )
    key = ConversationKey("tsweep", new_id("u"), new_id("c"))
    tenant, user = key.tenant_id, key.user_id
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    async with bot(settings) as (_, client), running_worker(settings) as worker:
        # A real conversation leaves facts, an episode and index entries.
        for text in ("hello, my name is Ann", "I live in Bangkok"):
            await client.publish(
                message_event(tenant=tenant, user=user, conversation=key.conversation_id, text=text)
            )
            await client.next_candidate()
        await client.publish(
            message_event(
                tenant=tenant,
                user=user,
                conversation=key.conversation_id,
                text=None,
                event_type="conversation.end",
            )
        )
        async with asyncio.timeout(60):
            while not await long_term_entries(worker, tenant, user):
                await asyncio.sleep(0.1)
        now = datetime.now(UTC)
        # A profile attribute set now, through a store whose profile age is 30 days.
        await store_at(worker, now).write(
            tenant,
            user,
            erasure=NO_ERASURE,
            profile=[ProfileAttribute(key="timezone", value="+07", updated_at=now.isoformat())],
        )
        ttl = await worker.redis.ttl(keys.long_term(tenant, user, "facts"))
        due = await worker.redis.zscore(*_retention_entry(keys, tenant, user))
        assert (POLICY.longest_days) * DAY < ttl <= (POLICY.longest_days + 1) * DAY
        assert due is not None
        assert abs(due - (now + timedelta(days=30)).timestamp()) < 120

        # Day 10: nobody is due, nothing changes.
        assert (
            await sweep_at(worker, now + timedelta(days=10)).run_once(
                (now + timedelta(days=10)).timestamp()
            )
            == 0
        )

        # Day 31: the profile attribute aged out; the facts stay; due again at day 365.
        later = now + timedelta(days=31)
        assert await sweep_at(worker, later).run_once(later.timestamp()) == 1
        assert await worker.ltm.profile(tenant, user) == {}
        assert len(await worker.ltm.facts(tenant, user)) == 2
        due = await worker.redis.zscore(*_retention_entry(keys, tenant, user))
        assert due is not None
        assert due > (now + timedelta(days=364)).timestamp()

        # Day 366: everything aged out, index entries of long-term items too; the user
        # leaves the schedule and the bundle is gone.
        last = now + timedelta(days=366)
        evicted = await sweep_at(worker, last).run_once(last.timestamp())
        assert evicted >= 3  # two facts and an episode, at least
        assert await worker.ltm.facts(tenant, user) == []
        assert await worker.ltm.episodes(tenant, user) == []
        assert not await worker.redis.exists(keys.long_term(tenant, user, "bundle"))
        assert await worker.redis.zscore(*_retention_entry(keys, tenant, user)) is None
        assert not await long_term_entries(worker, tenant, user)
        evictions = worker.base.metrics.registry.get_sample_value(
            "llmbot_ltm_evictions_total", {"kind": "facts"}
        )
        assert evictions == 2


async def test_a_user_erased_meanwhile_is_skipped_and_left_for_the_next_sweep(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    """An erasure in progress makes the sweep skip the user (retryable), not fail."""
    settings = settings_for_test(service_urls, model.base_url, redis_key_prefix=own_prefix())
    tenant, user = "tsweep", new_id("u")
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    async with running_worker(settings) as worker:
        then = datetime.now(UTC) - timedelta(days=400)
        await store_at(worker, then).write(
            tenant, user, erasure=NO_ERASURE, facts=[fact("f1", then)]
        )
        await worker.redis.hset(
            keys.erasure(tenant, user), "active:x", str(datetime.now(UTC).timestamp() + 60)
        )
        now = datetime.now(UTC)
        assert await sweep_at(worker, now).run_once(now.timestamp()) == 0
        assert [f.id for f in await worker.ltm.facts(tenant, user)] == ["f1"]
        await worker.redis.hdel(keys.erasure(tenant, user), "active:x")
        assert await sweep_at(worker, now).run_once(now.timestamp()) == 1
        assert await worker.ltm.facts(tenant, user) == []


async def test_erasing_a_user_takes_them_off_the_schedule(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    settings = settings_for_test(service_urls, model.base_url, redis_key_prefix=own_prefix())
    tenant, user = "tsweep", new_id("u")
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    async with bot(settings) as (service, _), running_worker(settings) as worker:
        now = datetime.now(UTC)
        await worker.ltm.write(tenant, user, erasure=NO_ERASURE, facts=[fact("f1", now)])
        assert await worker.redis.zscore(*_retention_entry(keys, tenant, user)) is not None
        await service.store.forget_user(tenant, user)
        assert await worker.redis.zscore(*_retention_entry(keys, tenant, user)) is None


def _retention_entry(keys: RedisKeys, tenant: str, user: str) -> tuple[str, str]:
    """The user's retention schedule shard and member."""
    member = user_member(tenant, user)
    return keys.retention_schedule().of(member), member
