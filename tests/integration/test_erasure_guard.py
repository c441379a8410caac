"""Every memory-worker write is refused once the user was erased after the job read the
erasure mark (real Redis): nothing of an erased user can come back from a job that
was already running when ``memory.forget`` arrived."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import NamedTuple

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.bootstrap import long_term_store, memory_store, progress_store
from llm_bot.config import Settings
from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.long_term import NotableEvent
from llm_bot.memory.working import ConversationKey
from tests.support.events import new_id

pytestmark = pytest.mark.integration


class Stores(NamedTuple):
    settings: Settings
    redis: aioredis.Redis
    store: RedisMemoryStore
    progress: RedisMemoryProgress
    ltm: RedisLongTermStore
    key: ConversationKey


@pytest.fixture
async def stores(make_settings: Callable[..., Settings]) -> AsyncIterator[Stores]:
    """The service's and the worker's Redis stores, and a fresh user's conversation."""
    settings = make_settings()
    client = aioredis.from_url(settings.redis_url.get_secret_value())
    yield Stores(
        settings=settings,
        redis=client,
        store=memory_store(settings, client),
        progress=progress_store(settings, client),
        ltm=long_term_store(settings, client),
        key=ConversationKey("tguard", new_id("u"), new_id("c")),
    )
    await client.aclose()


def notable(key: ConversationKey) -> NotableEvent:
    return NotableEvent(
        id=new_id("ne"),
        event_type="REQUEST",
        importance=0.8,
        summary="wants a refund",
        conversation_id=key.conversation_id,
        turn=1,
        event_id=new_id("evt"),
        created_at=datetime.now(UTC).isoformat(),
    )


@pytest.mark.parametrize("scope", ["user", "conversation"])
async def test_writes_read_before_an_erasure_are_refused_and_leave_no_key(
    scope: str, stores: Stores
) -> None:
    settings, redis, store, progress, ltm, key = stores
    before = await progress.erasure(key.tenant_id, key.user_id)
    if scope == "user":
        await store.forget_user(key.tenant_id, key.user_id)
    else:
        await store.forget_conversation(key)
    writes: list[Callable[[], Awaitable[object]]] = [
        lambda: ltm.write(key.tenant_id, key.user_id, erasure=before, events=[notable(key)]),
        lambda: ltm.apply_retention(key.tenant_id, key.user_id, erasure=before),
        lambda: progress.mark_classified(key, 1, erasure=before),
        lambda: progress.mark_job_done(key.tenant_id, key.user_id, "job_x", erasure=before),
        lambda: progress.commit_compaction(
            key,
            erasure=before,
            lease_token="t",  # noqa: S106  # a fencing token, not a secret
            expected_compacted_through=0,
            compacted_through=1,
            memory=None,
        ),
    ]
    for write in writes:
        with pytest.raises(ErasedMeanwhile):
            await write()
    scope_keys = await redis.keys(f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:*")
    assert [k.decode() for k in scope_keys] == [
        f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:erasure"
    ]
    assert 0 < await redis.ttl(scope_keys[0]) <= 86_400
    assert (await redis.get(scope_keys[0])).startswith(b"erased:")


async def test_a_job_reading_during_an_erasure_waits_and_retries(stores: Stores) -> None:
    """While an erasure deletes (mark ``erasing:``), reading the mark raises the retryable
    ErasedMeanwhile: the job backs off instead of working from half-deleted memory."""
    settings, redis, _, progress, _, key = stores
    await redis.set(
        f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:erasure", "erasing:x", ex=60
    )
    with pytest.raises(ErasedMeanwhile) as raised:
        await progress.erasure(key.tenant_id, key.user_id)
    assert raised.value.retryable
    await redis.delete(f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:erasure")


async def test_writes_after_the_erasure_proceed(stores: Stores) -> None:
    """A job that started after the erasure (read the new mark) writes normally."""
    _, _, store, progress, ltm, key = stores
    await store.forget_user(key.tenant_id, key.user_id)
    now = await progress.erasure(key.tenant_id, key.user_id)
    assert now.startswith("erased:")
    assert await ltm.write(key.tenant_id, key.user_id, erasure=now, events=[notable(key)]) == 1
    await progress.mark_job_done(key.tenant_id, key.user_id, "job_y", erasure=now)
    assert await progress.job_done(key.tenant_id, key.user_id, "job_y")
    assert len(await ltm.events(key.tenant_id, key.user_id)) == 1
    await store.forget_user(key.tenant_id, key.user_id)
