"""Erasure costs O(the user): it reads the user's key registry, never SCANs the keyspace,
and memory recorded before the registry existed is registered by ``memory reindex``.

On a redis-server of the test's own, so the server's command counters are this test's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import progress_store, redis_client
from llm_bot.config import Settings
from llm_bot.entrypoints import memory_cli, recall_cli
from tests.support.checks import key_text
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, bot
from tests.support.service_control import PrivateRedis, private_redis

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own_redis() -> Iterator[PrivateRedis]:
    with private_redis() as server:
        yield server


async def _converse(client: Integrator, tenant: str, user: str, turns: int) -> None:
    for i in range(turns):
        conversation = f"c{i % 2}"
        await client.publish(
            message_event(tenant=tenant, user=user, conversation=conversation, text=f"hi {i}")
        )
        await client.next_candidate()


async def _names(redis: RedisClient, pattern: str) -> set[str]:
    return {key_text(name) async for name in redis.scan_iter(match=pattern)}


async def _command_calls(redis: RedisClient, command: str) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_forgetting_a_user_deletes_their_keys_without_scanning(
    make_settings: Callable[..., Settings], own_redis: PrivateRedis
) -> None:
    settings = make_settings(redis_url=own_redis.url, embeddings="off")
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    user, bystander = new_id("u"), new_id("u")
    async with bot(settings) as (service, client):
        await _converse(client, "tcost", user, 4)
        await _converse(client, "tcost", bystander, 2)
        progress = progress_store(settings, service.redis)
        erasure = await progress.erasure("tcost", user)
        await progress.mark_job_done("tcost", user, "job_1", erasure=erasure)
    redis = redis_client(settings.redis)
    try:
        mine = await _names(redis, keys.user_pattern("tcost", user))
        theirs = await _names(redis, keys.user_pattern("tcost", bystander))
        assert keys.memory_job("tcost", user, "job_1") in mine
        assert len(mine) >= 2 * 3 + 4  # two conversations' wm/meta/trace, four event records
        await redis.config_resetstat()
        deleted = await memory_cli.forget_memory(settings, "tcost", user, "*")
        scans = await _command_calls(redis, "scan") + await _command_calls(redis, "keys")
        left = await _names(redis, keys.user_pattern("tcost", user))
        assert await _names(redis, keys.user_pattern("tcost", bystander)) == theirs
    finally:
        await redis.aclose()
    assert scans == 0
    assert left == {keys.erasure("tcost", user)}
    assert deleted == len(mine - {keys.registry("tcost", user)})


async def test_reindex_registers_memory_recorded_before_the_registry(
    make_settings: Callable[..., Settings], own_redis: PrivateRedis
) -> None:
    """Without a registry (memory from an older version) erasure would miss the keys with
    ids in their names; ``memory reindex`` registers them (retrieval off: keys only)."""
    settings = make_settings(redis_url=own_redis.url, embeddings="off")
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    legacy, registered = new_id("u"), new_id("u")
    async with bot(settings) as (_, client):
        await _converse(client, "told", legacy, 2)
        await _converse(client, "told", registered, 2)
    redis = redis_client(settings.redis)
    try:
        for user in (legacy, registered):
            await redis.unlink(keys.registry("told", user))  # as an older version left it
        await memory_cli.forget_memory(settings, "told", legacy, "*")
        missed = await _names(redis, keys.user_pattern("told", legacy))
        lines: list[str] = []
        await recall_cli.reindex(
            settings, tenant_id="told", user_id=None, rebuild=False, progress=lines.append
        )
        await memory_cli.forget_memory(settings, "told", registered, "*")
        left = await _names(redis, keys.user_pattern("told", registered))
        legacy_registry = await redis.zrange(keys.registry("told", legacy), 0, -1)
    finally:
        await redis.aclose()
    assert len(missed) > 1  # the erasure mark and keys it could not know of
    assert lines == ["2 users' keys registered; retrieval is off: nothing indexed"]
    assert left == {keys.erasure("told", registered)}
    # the erasure mark (left by the first forget) is never registered: erasure keeps it
    assert keys.erasure("told", legacy).encode() not in legacy_registry
    assert len(legacy_registry) == len(missed) - 1
