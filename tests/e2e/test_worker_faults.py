"""The memory worker killed and restarted mid-stream loses and doubles nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llm_bot.bootstrap import long_term_store, progress_store, redis_client
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import message_event, new_id
from tests.support.harness import bot, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        server.set_latency(0.03)
        yield server


async def test_worker_kill_9_and_restart_loses_and_doubles_nothing(
    service_urls: ServiceUrls, memory_model: FakeModelServer, tmp_path: Path
) -> None:
    """SIGKILL of the worker mid-stream, then a new worker: every evicted turn is folded
    into exactly one episode, notable events and facts are not doubled, nothing pending."""
    settings = settings_for_test(
        service_urls,
        memory_model.base_url,
        memory_max_messages=4,
        retry_base_seconds=0.05,
        lease_seconds=2,
    )
    keys = [ConversationKey("twk", new_id("u"), new_id("c")) for _ in range(3)]
    async with bot(settings) as (_, client):
        first = ConsumerProcess(settings, log_path=tmp_path / "worker1.log", command="worker")
        await first.start()
        await first.wait_ready()
        for turn in range(1, 13):
            for key in keys:
                text = "my name is Ann" if turn == 1 else f"please refund order {turn}"
                await client.publish(
                    message_event(
                        tenant=key.tenant_id,
                        user=key.user_id,
                        conversation=key.conversation_id,
                        text=text,
                    )
                )
            for _ in keys:
                await client.next_candidate()
            if turn == 6:
                first.kill()
                await first.process.wait() if first.process else None
        second = ConsumerProcess(settings, log_path=tmp_path / "worker2.log", command="worker")
        await second.start()
        try:
            await second.wait_ready()
            quiet = 0
            async with asyncio.timeout(60):
                while quiet < 10:
                    depth = await client.queue_depth(settings.memory_queue)
                    quiet = quiet + 1 if depth == 0 else 0
                    await asyncio.sleep(0.2)
        finally:
            await second.stop()
    redis = redis_client(settings.redis)
    try:
        progress, ltm = progress_store(settings, redis), long_term_store(settings, redis)
        for key in keys:
            state = await progress.load(key)
            assert state.memory is not None
            assert state.memory.pending_compaction == ()
            window = {m.turn for m in state.memory.messages}
            assert state.compacted_through == min(window) - 1
            episodes = await ltm.episodes(key.tenant_id, key.user_id)
            covered = sorted(t for episode in episodes for t in episode.turns)
            assert covered == list(range(1, state.compacted_through + 1))
            events = await ltm.events(key.tenant_id, key.user_id)
            assert sorted(e.turn for e in events) == list(range(2, 13))
            facts = await ltm.facts(key.tenant_id, key.user_id)
            assert [f.fact for f in facts] == ["The user's name is Ann."]
            assert state.classified_through == 12
    finally:
        await redis.aclose()
