"""After ``memory.forget``, no key of the forgotten user is left on any master within 5 s
but the erasure mark (SPEC 5.8; docs/memory.md "Erasure"): the ``evt`` records (each
event's turn and reply) and the retrieval index (``idx:doc``, the messages' text)
included, with the memory worker's jobs of those users still in flight, and with the
user's messages still waiting in the fair queue (made before the forget: skipped, never
recorded). The same checks on a Redis Cluster of 3 masters (every master scanned) and on
one server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import Settings
from llm_bot.entrypoints import memory_cli
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from tests.integration.test_transcript_import import acked
from tests.support.checks import assert_one_candidate_id_per_event, collect_candidates, key_text
from tests.support.events import conversation_event, message_event, new_id
from tests.support.harness import bot, running_worker, settings_for_test
from tests.support.redis_cluster import RedisClusterNodes
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

ERASED_WITHIN_SECONDS = 5.0


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


async def _forget_two_of(
    settings: Settings, users: int, names_of: Callable[[str], set[str]]
) -> None:
    """``users`` users say three things each; two are forgotten (one by event, one by
    command) while the worker still digests their turns; within 5 s only their erasure
    marks are left (``names_of(pattern)``: the key names matching it on every master), and
    two seconds later still; everyone else keeps their memory."""
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    tenant = new_id("t")
    conversations = [ConversationKey(tenant, new_id("u"), new_id("c")) for _ in range(users)]
    by_event, by_command, *others = conversations
    async with bot(settings) as (_, client), running_worker(settings):
        for text in ("my name is Ann", "I speak Thai", "I want a refund for order 42"):
            events = [conversation_event(key, text) for key in conversations]
            for event in events:
                await client.publish(event)
            ids = [str(event["id"]) for event in events]
            assert_one_candidate_id_per_event(await collect_candidates(client, ids, settle=0), ids)
        before = {
            key: names_of(keys.user_pattern(tenant, key.user_id)) for key in (by_event, by_command)
        }
        assert all(
            keys.recall_index(tenant, key.user_id, "doc") in before[key]
            and any(":evt:" in name for name in before[key])
            for key in before
        ), before
        started = time.monotonic()
        await client.publish(
            message_event(
                tenant=tenant,
                user=by_event.user_id,
                conversation="*",
                text=None,
                event_type="memory.forget",
            )
        )
        await memory_cli.forget_memory(settings, tenant, by_command.user_id, "*")

        def left() -> dict[str, set[str]]:
            return {
                key.user_id: names_of(keys.user_pattern(tenant, key.user_id))
                - {keys.erasure(tenant, key.user_id)}
                for key in (by_event, by_command)
            }

        while any(left().values()) and time.monotonic() - started < ERASED_WITHIN_SECONDS:
            await asyncio.sleep(0.2)
        assert left() == {by_event.user_id: set(), by_command.user_id: set()}
        await asyncio.sleep(2.0)  # what was in flight for them writes nothing back
        assert left() == {by_event.user_id: set(), by_command.user_id: set()}
        for key in (by_event, by_command):
            assert names_of(keys.erasure(tenant, key.user_id)) == {
                keys.erasure(tenant, key.user_id)
            }
        for key in others:
            assert keys.conversation_meta(key) in names_of(keys.user_pattern(tenant, key.user_id))


@pytest.mark.cluster
async def test_no_key_of_a_forgotten_user_survives_on_any_master_of_a_cluster(
    service_urls: ServiceUrls, memory_model: FakeModelServer, redis_cluster: RedisClusterNodes
) -> None:
    settings = settings_for_test(
        service_urls, memory_model.base_url, redis_url=redis_cluster.url, retry_base_seconds=0.05
    )
    await _forget_two_of(settings, 40, redis_cluster.keys_everywhere)


async def test_no_key_of_a_forgotten_user_survives_on_one_server(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> None:
    settings = settings_for_test(service_urls, memory_model.base_url, retry_base_seconds=0.05)
    client = redis.Redis.from_url(settings.redis_url.get_secret_value())
    try:
        await _forget_two_of(
            settings,
            10,
            lambda pattern: {
                key_text(name) for name in client.scan_iter(match=pattern, count=1000)
            },
        )
    finally:
        client.close()


async def _said_before_the_forget(
    service_urls: ServiceUrls, redis_url: str, names_of: Callable[[str], set[str]]
) -> None:
    """Six messages of one conversation wait behind each other in the fair queue (a slow
    model) when the ``memory.forget`` comes, which is processed at once: the one in flight
    and the five waiting are skipped when their turn comes (made before the erasure), so
    nothing of them is recorded after it; a message made after the forget is answered and
    remembered as usual."""
    async with FakeModelServer() as model:
        model.set_latency(0.3)
        settings = settings_for_test(
            service_urls,
            model.base_url,
            redis_url=redis_url,
            retry_base_seconds=0.05,
            embeddings="off",
        )
        keys = RedisKeys(prefix=settings.redis_key_prefix)
        key = ConversationKey(new_id("t"), new_id("u"), new_id("c"))
        async with bot(settings) as (service, integrator):
            for n in range(6):
                await integrator.publish(conversation_event(key, f"my secret is {n}"))
            await asyncio.sleep(0.2)  # the first one is with the model
            await integrator.publish(
                message_event(
                    tenant=key.tenant_id,
                    user=key.user_id,
                    conversation="*",
                    text=None,
                    event_type="memory.forget",
                )
            )
            await acked(integrator, service, events=7)
            left = names_of(keys.user_pattern(key.tenant_id, key.user_id))
            assert left == {keys.erasure(key.tenant_id, key.user_id)}
            assert integrator.candidates.empty()
            skipped = service.metrics.registry.get_sample_value(
                "llmbot_events_total", {"outcome": "skip"}
            )
            assert skipped == 6.0

            await integrator.publish(conversation_event(key, "hello again"))
            reply = await integrator.next_candidate()
            assert reply.body["text"]
            assert keys.conversation_meta(key) in names_of(
                keys.user_pattern(key.tenant_id, key.user_id)
            )


async def test_what_the_user_said_before_the_forget_is_not_recorded_after_it(
    service_urls: ServiceUrls,
) -> None:
    client = redis.Redis.from_url(service_urls.redis_url)
    try:
        await _said_before_the_forget(
            service_urls,
            service_urls.redis_url,
            lambda pattern: {
                key_text(name) for name in client.scan_iter(match=pattern, count=1000)
            },
        )
    finally:
        client.close()


@pytest.mark.cluster
async def test_what_the_user_said_before_the_forget_is_not_recorded_after_it_on_a_cluster(
    service_urls: ServiceUrls, redis_cluster: RedisClusterNodes
) -> None:
    await _said_before_the_forget(service_urls, redis_cluster.url, redis_cluster.keys_everywhere)
