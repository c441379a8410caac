"""Every memory-worker write is refused once the user was erased after the job read the
erasure mark (real Redis): nothing of an erased user can come back from a job that
was already running when ``memory.forget`` arrived."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import NamedTuple

import pytest
import redis.asyncio as aioredis

from llm_bot.adapters.redis_erasure import ErasureMarks
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.adapters.redis_memory import RedisMemoryStore
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.bootstrap import long_term_store, memory_store, progress_store
from llm_bot.config import Settings
from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import NotableEvent
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import MemoryCommit, ProcessedEvent, WorkingMemory
from tests.support.checks import key_text
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
    assert [key_text(k) for k in scope_keys] == [
        f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:erasure"
    ]
    assert 0 < await redis.ttl(scope_keys[0]) <= 86_400
    mark = await redis.hgetall(scope_keys[0])
    assert set(mark) == {b"gen"}  # a generation, no erasure left active, no content


async def test_a_job_reading_during_an_erasure_waits_and_retries(stores: Stores) -> None:
    """While an erasure is active, reading the mark raises the retryable ErasedMeanwhile,
    in a memory job and in the service's recall alike: they back off instead of working
    from half-deleted memory. An erasure whose process died counts as over after its
    deadline."""
    settings, redis, store, progress, _, key = stores
    name = f"{settings.redis_key_prefix}:{{tguard|{key.user_id}}}:erasure"
    await redis.hset(name, mapping={"gen": "g1", "active:x": time.time() + 60})
    with pytest.raises(ErasedMeanwhile) as raised:
        await progress.erasure(key.tenant_id, key.user_id)
    assert raised.value.retryable
    with pytest.raises(ErasedMeanwhile):
        await store.load(key, new_id("evt"))
    await redis.hset(name, mapping={"active:x": time.time() - 1})  # abandoned
    assert await progress.erasure(key.tenant_id, key.user_id) == "g1"
    assert (await store.load(key, new_id("evt"))).erasure == "g1"
    await redis.delete(name)


async def test_overlapping_erasures_keep_readers_waiting_until_both_end(stores: Stores) -> None:
    """Two erasures of one user at once (two replicas, or the CLI beside the service): the
    first to end does not release readers while the other still deletes."""
    _, _, _, progress, _, key = stores
    marks = ErasureMarks(
        client=stores.redis, keys=RedisKeys(prefix=stores.settings.redis_key_prefix)
    )
    first = await marks.begin(key.tenant_id, key.user_id)
    second = await marks.begin(key.tenant_id, key.user_id)
    await marks.end(key.tenant_id, key.user_id, first)
    with pytest.raises(ErasedMeanwhile):
        await progress.erasure(key.tenant_id, key.user_id)
    await marks.end(key.tenant_id, key.user_id, second)
    assert await progress.erasure(key.tenant_id, key.user_id) != ""
    await stores.redis.delete(
        RedisKeys(prefix=stores.settings.redis_key_prefix).erasure(key.tenant_id, key.user_id)
    )


async def test_writes_after_the_erasure_proceed(stores: Stores) -> None:
    """A job that started after the erasure (read the new mark) writes normally."""
    _, _, store, progress, ltm, key = stores
    await store.forget_user(key.tenant_id, key.user_id)
    now = await progress.erasure(key.tenant_id, key.user_id)
    assert now != ""
    assert await ltm.write(key.tenant_id, key.user_id, erasure=now, events=[notable(key)]) == 1
    await progress.mark_job_done(key.tenant_id, key.user_id, "job_y", erasure=now)
    assert await progress.job_done(key.tenant_id, key.user_id, "job_y")
    assert len(await ltm.events(key.tenant_id, key.user_id)) == 1
    await store.forget_user(key.tenant_id, key.user_id)


async def test_a_reply_commit_after_an_erasure_is_refused(stores: Stores) -> None:
    """The service's turn commit carries the generation its recall read: an erasure in
    between (the model call can take seconds) refuses it, and the retry starts over on
    what is left. Without the guard a first turn would store a reply built from the erased
    long-term memory."""
    _, redis, store, _, _, key = stores
    event_id = new_id("evt")
    recalled = await store.load(key, event_id)
    await store.forget_user(key.tenant_id, key.user_id)
    message = ChatMessage(
        id=f"{event_id}:user",
        role="user",
        content="hello",
        created_at=datetime.now(UTC).isoformat(),
        turn=1,
        seq=0,
        event_id=event_id,
    )
    commit = MemoryCommit(
        key=key,
        expected_version=recalled.version,
        turn=1,
        memory=WorkingMemory(messages=(message,)),
        trace=(message,),
        processed=ProcessedEvent(event_id=event_id, turn=1),
        erasure=recalled.erasure,
    )
    with pytest.raises(ErasedMeanwhile):
        await store.commit(commit)
    assert await store.working_memory(key) is None
    fresh = await store.load(key, event_id)
    assert await store.commit(replace(commit, erasure=fresh.erasure)) == 1
    await store.forget_user(key.tenant_id, key.user_id)
    await redis.delete(
        RedisKeys(prefix=stores.settings.redis_key_prefix).erasure(key.tenant_id, key.user_id)
    )
