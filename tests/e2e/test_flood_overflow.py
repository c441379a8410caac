"""A flood larger than the admitting replica's window (SPEC 4 "Fairness", "Bounded waiting";
issue 42): one ``llm-bot run`` with a small window (``LLM_BOT_MAX_WAITING`` 32, a tenant
bound of 16), a slow model, one tenant publishing ten times the window, then a quiet
tenant. The flood's excess moves to its overflow queue, so the quiet tenant's events are
reached and answered while most of the flood still waits; every flood event is answered
once, and each flood conversation is remembered in publish order.

Before the overflow queues, the flood's held-back deliveries filled the window and the
quiet tenant's events stayed in the broker until the flood had drained.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.e2e.test_redis_loss import _metric
from tests.support.checks import (
    assert_memory_turns_exactly_once,
    assert_one_candidate_id_per_event,
    collect_candidates,
    dlq_depth,
)
from tests.support.events import conversation_event, new_id
from tests.support.harness import Received, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

WINDOW = 32
FLOOD_CONVERSATIONS = 20
FLOOD_MESSAGES = 16  # 320 events: ten windows


async def test_a_quiet_tenant_is_answered_past_a_flood_ten_times_the_window(
    service_urls: ServiceUrls, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.set_latency(0.1)
    settings = settings_for_test(
        service_urls,
        fake_model.base_url,
        prefetch=4,
        max_waiting=WINDOW,
        tenant_max_waiting=WINDOW // 2,
    )
    flood = [
        ConversationKey("tflood", new_id("u"), new_id("c")) for _ in range(FLOOD_CONVERSATIONS)
    ]
    quiet = [ConversationKey("tquiet", new_id("u"), new_id("c")) for _ in range(3)]
    flood_events = {
        key: [conversation_event(key, f"flood {n}") for n in range(FLOOD_MESSAGES)] for key in flood
    }
    flood_ids = [str(e["id"]) for batch in flood_events.values() for e in batch]
    quiet_ids: list[str] = []
    replica = ConsumerProcess(settings, log_path=tmp_path / "replica.log")
    received: list[Received] = []
    async with integrator(settings) as client:
        try:
            await replica.start()
            await replica.wait_ready(within=120)
            for n in range(FLOOD_MESSAGES):  # conversations interleaved, each in order
                for key in flood:
                    await client.publish(flood_events[key][n])
            for key in quiet:
                event = conversation_event(key, "a quiet question")
                quiet_ids.append(str(event["id"]))
                await client.publish(event)
            waiting = set(quiet_ids)
            async with asyncio.timeout(120):
                while waiting:
                    candidate = await client.candidates.get()
                    received.append(candidate)
                    waiting.discard(candidate.body["event_id"])
            flood_before_quiet = sum(1 for r in received if r.body["event_id"] in flood_ids)
            moved = await _metric(replica, 'llmbot_fair_queue_overflowed_total{result="moved"}')
            seen = {r.body["event_id"] for r in received}
            rest = [event_id for event_id in flood_ids if event_id not in seen]
            received += await collect_candidates(client, rest, within=180, settle=1.0)
            assert client.errors.empty(), "an event got an ErrorV1"
            assert await dlq_depth(client) == 0
        finally:
            await replica.stop()
    # The quiet tenant was reached while most of the flood still waited (before: behind it).
    assert flood_before_quiet < len(flood_ids) // 2, f"{flood_before_quiet} of the flood first"
    assert moved > 0, "the flood's excess never moved to its overflow queue"
    assert_one_candidate_id_per_event(received, flood_ids + quiet_ids)
    for key in flood:
        ids = [str(e["id"]) for e in flood_events[key]]
        assert await assert_memory_turns_exactly_once(settings, key, ids) == ids
