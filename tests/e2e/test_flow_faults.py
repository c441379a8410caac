"""A flow survives a kill -9 of the consumer applying an answer: another replica picks
the redelivered answer up at the same question, and the result comes out once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.integration.test_flows import PERSONAS, own_keys
from tests.support.checks import assert_memory_turns_exactly_once, dlq_depth
from tests.support.events import conversation_event, new_id
from tests.support.harness import Integrator, integrator
from tests.support.processes import ConsumerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


async def _replica(settings: Settings, log: Path) -> ConsumerProcess:
    process = ConsumerProcess(settings, log_path=log)
    await process.start()
    await process.wait_ready()
    return process


async def _say(client: Integrator, key: ConversationKey, text: str, **metadata: str) -> str:
    event = conversation_event(key, text, metadata=metadata)
    await client.publish(event)
    return str(event["id"])


async def test_kill_9_mid_answer_resumes_in_another_replica_at_the_same_question(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    personas = tmp_path / "personas.yaml"
    personas.write_text(PERSONAS, encoding="utf-8")
    settings = make_settings(personas_path=str(personas), lease_seconds=2)
    key = ConversationKey("tfk", new_id("u"), new_id("c"))
    ids: list[str] = []
    texts: list[str] = []
    async with integrator(settings) as client:
        first = await _replica(settings, tmp_path / "first.log")
        try:
            ids.append(await _say(client, key, "hi", persona="checkin"))
            texts.append((await client.next_candidate(within=30)).body["text"])
            ids.append(await _say(client, key, "9"))
            texts.append((await client.next_candidate(within=30)).body["text"])
            # An ambiguous answer: the replica asks the model (slow), and dies meanwhile.
            fake_model.set_latency(1.5)
            fake_model.script('{"value": true}', '{"value": true}')
            asked = len(fake_model.chat_requests())
            ids.append(await _say(client, key, "yes and no, mostly yes"))
            await fake_model.requests_started(asked + 1)  # the model is reading it
            first.kill()
        finally:
            await first.stop()
        second = await _replica(settings, tmp_path / "second.log")
        try:
            answered = await client.next_candidate(within=60)
            texts.append(answered.body["text"])
            fake_model.set_latency(0)
            ids.append(await _say(client, key, "water"))
            # the dead replica's delivery comes back from the broker and is answered again
            # from the stored record: the same candidate id, which an integrator drops
            latest = await client.next_candidate(within=30)
            while latest.body["id"] == answered.body["id"]:
                latest = await client.next_candidate(within=30)
            texts.append(latest.body["text"])
            results = await client.flow_results(1, settle=1.0)
            assert await dlq_depth(client) == 0
        finally:
            await second.stop()
    assert texts == [
        "Time for your check-in. How are you feeling today, from 1 to 10?",
        "Did you sleep well?",
        "What will you drink? (coffee, tea or water)",
        "Thanks, check-in done.",
    ]
    # The first replica had asked the model when it died; the second asked again.
    assert len(fake_model.chat_requests()) == 2
    (result,) = results
    assert [(a["question_id"], a["value"], a["attempts"]) for a in result["answers"]] == [
        ("mood", 9, 1),
        ("slept", True, 1),
        ("drink", "water", 1),
    ]
    await assert_memory_turns_exactly_once(settings, key, ids)


async def test_a_flow_left_waiting_is_expired_by_a_worker_started_later(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """The expiry is kept in Redis, not in a process: the flow is started and left with no
    worker running; a worker process started after its TTL finds it on its first sweep."""
    personas = tmp_path / "personas.yaml"
    personas.write_text(PERSONAS, encoding="utf-8")
    settings = make_settings(
        personas_path=str(personas),
        flow_ttl_seconds=1,
        sweep_interval_seconds=0.5,
        redis_key_prefix=own_keys(),  # the expiry schedule of this test alone
    )
    key = ConversationKey("tfx", new_id("u"), new_id("c"))
    async with integrator(settings) as client:
        consumer = await _replica(settings, tmp_path / "consumer.log")
        try:
            await _say(client, key, "hi", persona="checkin")
            await client.next_candidate(within=30)
            await _say(client, key, "3")
            assert (await client.next_candidate(within=30)).body["text"] == (
                "What is weighing on you?"
            )
            await asyncio.sleep(1.5)  # past the TTL, and no worker anywhere
            worker = ConsumerProcess(settings, log_path=tmp_path / "worker.log", command="worker")
            await worker.start()
            try:
                results = await client.flow_results(1, within=30, settle=1.0)
            finally:
                await worker.stop()
        finally:
            await consumer.stop()
    (result,) = results
    assert result["conversation_id"] == key.conversation_id
    assert result["status"] == "expired"
    assert [(a["question_id"], a["value"]) for a in result["answers"]] == [
        ("mood", 3),
        ("slept", None),
        ("drink", None),
    ]
