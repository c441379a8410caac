"""SIGTERM: stop taking deliveries, finish in-flight work within the grace period,
requeue the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.checks import assert_one_candidate_id_per_event, collect_candidates
from tests.support.events import message_event, new_id
from tests.support.harness import integrator
from tests.support.processes import ConsumerProcess

pytestmark = pytest.mark.e2e


async def test_sigterm_drains_in_flight_events_within_the_grace_period(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """In-flight events finish and are answered before the process exits 0."""
    fake_model.set_latency(1.0)
    settings = make_settings(shutdown_grace_seconds=10)
    events = [
        message_event(tenant="tsd", user=new_id("u"), conversation=new_id("c"), text="x")
        for _ in range(4)
    ]
    async with integrator(settings) as client:
        proc = ConsumerProcess(settings, log_path=tmp_path / "consumer.log")
        await proc.start()
        await proc.wait_ready()
        for event in events:
            await client.publish(event)
        while len(fake_model.chat_requests()) < 4:
            await asyncio.sleep(0.05)
        code = await proc.stop(within=20)
        assert code == 0
        received = await collect_candidates(client, [str(e["id"]) for e in events], within=5)
        assert await client.ingress_depth() == 0
    assert_one_candidate_id_per_event(received, [str(e["id"]) for e in events])
    log = (tmp_path / "consumer.log").read_text()
    assert "consumer.requeued_on_shutdown" not in log


async def test_sigterm_requeues_what_cannot_finish_and_another_process_answers_it(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    """Past the grace period the rest is requeued, not lost: the next process answers it."""
    fake_model.set_latency(3.0)
    settings = make_settings(shutdown_grace_seconds=0.5)
    events = [
        message_event(tenant="tsr", user=new_id("u"), conversation=new_id("c"), text="x")
        for _ in range(3)
    ]
    ids = [str(e["id"]) for e in events]
    async with integrator(settings) as client:
        first = ConsumerProcess(settings, log_path=tmp_path / "first.log")
        await first.start()
        await first.wait_ready()
        for event in events:
            await client.publish(event)
        while len(fake_model.chat_requests()) < 3:
            await asyncio.sleep(0.05)
        assert await first.stop(within=20) == 0
        assert "consumer.requeued_on_shutdown" in (tmp_path / "first.log").read_text()
        assert client.candidates.empty()
        fake_model.set_latency(0.0)
        second = ConsumerProcess(settings, log_path=tmp_path / "second.log")
        await second.start()
        try:
            received = await collect_candidates(client, ids, within=30)
        finally:
            await second.stop()
    assert_one_candidate_id_per_event(received, ids)
