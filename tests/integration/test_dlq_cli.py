"""``llm-bot dlq list|replay`` against real dead letters on a real broker."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue

from llm_bot.adapters.rabbit_dlq import RabbitDlq, ReplayFailed
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.config import Settings
from llm_bot.entrypoints import dlq_cli
from llm_bot.fake_model import FakeModelServer, Fault
from tests.support.events import encode, message_event, new_id
from tests.support.harness import Integrator, bot, integrator, running_service, running_worker
from tests.support.processes import CHILD_WITHIN_SECONDS

pytestmark = pytest.mark.integration

SECRET = "my card number is 4111-1111"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def _take(queue: AbstractQueue, count: int, *, no_ack: bool) -> list[AbstractIncomingMessage]:
    """The next ``count`` messages of ``queue``, by a consumer (the ingress queue has a
    single active consumer: RabbitMQ refuses ``basic.get`` on it)."""
    taken: list[AbstractIncomingMessage] = []
    async with asyncio.timeout(5), queue.iterator(no_ack=no_ack) as messages:
        async for message in messages:
            taken.append(message)
            if len(taken) == count:
                break
    return taken


def _dlq(client: Integrator) -> RabbitDlq:
    return RabbitDlq(
        connection=client.connection, topology=Topology.from_settings(client.settings.broker)
    )


async def _wait_depth(client: Integrator, expected: int, within: float = 10.0) -> None:
    dlq = _dlq(client)
    async with asyncio.timeout(within):
        while await dlq.depth() != expected:
            await asyncio.sleep(0.05)


async def _dead_letter_three(
    client: Integrator, fake_model: FakeModelServer
) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """Invalid JSON, a schema violation and a model rejection, in this order in the DLQ."""
    broken = b'{"schema": "internal.event.v2", "id": '
    await client.publish(broken)
    await _wait_depth(client, 1)
    bad = message_event(tenant="tdlq", user=new_id("u"), conversation=new_id("c"), text=SECRET)
    bad["type"] = "shout"
    await client.publish(bad, headers={"traceparent": TRACEPARENT})
    await _wait_depth(client, 2)
    fake_model.script(Fault.status(400, "bad request"))
    rejected = message_event(tenant="tdlq", user=new_id("u"), conversation=new_id("c"), text=SECRET)
    await client.publish(rejected)
    await _wait_depth(client, 3)
    return broken, bad, rejected


async def test_list_shows_codes_and_ids_and_leaves_the_dlq_unchanged(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """list reports code, ids, attempts and size in DLQ order, never the body, removes nothing."""
    async with bot(make_settings()) as (_, client):
        broken, bad, rejected = await _dead_letter_three(client, fake_model)
        dlq = _dlq(client)
        letters = await dlq.list_dead_letters(10)
        assert [x.code for x in letters] == ["invalid_event", "invalid_event", "model_error"]
        assert [x.event_id for x in letters] == [None, bad["id"], rejected["id"]]
        assert [x.tenant_id for x in letters] == [None, "tdlq", "tdlq"]
        assert [x.message_id for x in letters[1:]] == [bad["id"], rejected["id"]]
        assert [x.position for x in letters] == [1, 2, 3]
        assert [x.attempts for x in letters] == [1, 1, 1]
        assert [x.body_size for x in letters] == [
            len(broken),
            len(encode(bad)),
            len(encode(rejected)),
        ]
        assert "invalid JSON" in str(letters[0].error_message)
        assert all(x.first_death is None for x in letters)  # the service dead-lettered these
        assert SECRET not in json.dumps([x.as_dict() for x in letters])
        await _wait_depth(client, 3)
        head = await dlq.list_dead_letters(2)
        assert [x.message_id for x in head] == [x.message_id for x in letters[:2]]
        await _wait_depth(client, 3)
        drained = await client.dead_letters(3)
        assert [m.message_id for m in drained] == [x.message_id for x in letters]


async def test_broker_dead_letter_gets_a_broker_code_and_replays_without_x_death(
    make_settings: Callable[..., Settings],
) -> None:
    """A broker dead letter (reject) lists as broker:rejected; its replay carries no x-death."""
    settings = make_settings()
    event = message_event(tenant="tdlq", user=new_id("u"), conversation=new_id("c"), text="x")
    async with integrator(settings) as client:
        topology = await declare_topology(client.channel, Topology.from_settings(settings.broker))
        await client.publish(event)
        [delivered] = await _take(topology.ingress, 1, no_ack=False)
        await delivered.reject(requeue=False)
        await _wait_depth(client, 1)
        [letter] = await _dlq(client).list_dead_letters(5)
        assert letter.code == "broker:rejected"
        assert isinstance(letter.first_death, datetime)
        assert letter.first_death.tzinfo is not None
        assert settings.ingress_queue in str(letter.error_message)
        assert (letter.attempts, letter.event_id) == (None, event["id"])
        result = await _dlq(client).replay(code="broker:rejected")
        assert (result.replayed, result.skipped, result.left) == (1, 0, 0)
        [replayed] = await _take(topology.ingress, 1, no_ack=True)
        assert replayed.body == encode(event)
        headers = replayed.headers or {}
        assert not [name for name in headers if "death" in name]


async def test_replay_by_code_goes_through_the_ingress_and_recovers_model_errors(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Replayed invalid events fail again via the ingress; a model_error one is then answered."""
    async with bot(make_settings()) as (_, client):
        broken, bad, rejected = await _dead_letter_three(client, fake_model)
        first_errors = {(await client.next_error()).body["event_id"] for _ in range(2)}
        assert first_errors == {bad["id"], rejected["id"]}
        dlq = _dlq(client)

        result = await dlq.replay(code="invalid_event")
        assert (result.replayed, result.skipped, result.left) == (2, 1, 1)
        error = await client.next_error()  # the schema violation came back through the ingress
        assert (error.body["event_id"], error.body["attempts"]) == (bad["id"], 1)
        await _wait_depth(client, 3)
        letters = await dlq.list_dead_letters(10)
        expected = [
            ("invalid_event", len(broken)),
            ("invalid_event", len(encode(bad))),
            ("model_error", len(encode(rejected))),
        ]
        assert sorted((x.code, x.body_size) for x in letters) == sorted(expected)

        result = await dlq.replay(code="model_error")  # the fake model answers normally again
        assert (result.replayed, result.skipped, result.left) == (1, 2, 2)
        candidate = await client.next_candidate()
        assert candidate.body["event_id"] == rejected["id"]
        await _wait_depth(client, 2)
        again = await client.dead_letters(2)
        assert all("x-replayed-at" in (m.headers or {}) for m in again)
        assert all(m.headers["x-attempts"] == 1 for m in again)
    assert len(fake_model.chat_requests()) == 2


async def test_replay_honours_limit_and_strips_error_headers(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """replay --limit 2 moves the 2 head messages, body/properties unchanged, error headers gone."""
    settings = make_settings()
    async with integrator(settings) as client:
        async with running_service(settings):
            broken, bad, _ = await _dead_letter_three(client, fake_model)
        dlq = _dlq(client)
        await dlq.list_dead_letters(10)  # a listing bumps the DLQ's own x-delivery-count
        await _wait_depth(client, 3)
        result = await dlq.replay(limit=2)
        assert (result.replayed, result.skipped, result.left) == (2, 0, 1)
        await _wait_depth(client, 1)
        assert await client.ingress_depth() == 2
        [remaining] = await dlq.list_dead_letters(10)
        assert remaining.code == "model_error"

        ingress = await client.channel.declare_queue(settings.ingress_queue, passive=True)
        first, second = await _take(ingress, 2, no_ack=True)
        assert (first.body, second.body) == (broken, encode(bad))
        assert second.message_id == bad["id"]
        assert second.content_type == "application/json"
        assert second.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
        for message in (first, second):
            headers = dict(message.headers or {})
            assert not [name for name in headers if name.startswith("x-error-")]
            assert "x-attempts" not in headers
            assert headers.get("x-delivery-count", 0) == 0
            datetime.fromisoformat(str(headers["x-replayed-at"]))
        assert second.headers["traceparent"] == TRACEPARENT


async def test_unroutable_replay_fails_and_keeps_the_message(
    make_settings: Callable[..., Settings],
) -> None:
    """With no queue bound to the ingress key the publish is returned and the message stays."""
    settings = make_settings()
    async with integrator(settings) as client:
        topology = await declare_topology(client.channel, Topology.from_settings(settings.broker))
        await client.channel.queue_delete(settings.ingress_queue)
        await topology.dlx.publish(
            aio_pika.Message(b"{}", headers={"x-error-code": "internal"}),
            routing_key=settings.ingress_routing_key,
        )
        await _wait_depth(client, 1)
        with pytest.raises(ReplayFailed, match="returned"):
            await _dlq(client).replay()
        await _wait_depth(client, 1)


async def test_listing_keeps_the_order_of_a_dlq_larger_than_a_return_batch(
    make_settings: Callable[..., Settings],
) -> None:
    """Listing a prefix, all, then another prefix of 40 dead letters leaves them in order."""
    settings = make_settings()
    async with integrator(settings) as client:
        topology = await declare_topology(client.channel, Topology.from_settings(settings.broker))
        ids = [f"m{i:02d}" for i in range(40)]
        for message_id in ids:
            await topology.dlx.publish(
                aio_pika.Message(b"{}", message_id=message_id, headers={"x-error-code": "timeout"}),
                routing_key=settings.ingress_routing_key,
            )
        await _wait_depth(client, 40)
        dlq = _dlq(client)
        for limit in (5, 100, 7, 39):
            assert [x.message_id for x in await dlq.list_dead_letters(limit)] == ids[:limit]
            assert await dlq.depth() == 40
        assert [m.message_id for m in await client.dead_letters(40)] == ids


def _cli_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_BOT_", "OPENAI_"))}
    env.update(
        {
            "AMQP_URL": settings.amqp_url.get_secret_value(),
            "LLM_BOT_INGRESS_EXCHANGE": settings.ingress_exchange,
            "LLM_BOT_INGRESS_ROUTING_KEY": settings.ingress_routing_key,
            "LLM_BOT_INGRESS_QUEUE": settings.ingress_queue,
            "LLM_BOT_DLQ": settings.dlq,
            "LLM_BOT_MEMORY_ROUTING_KEY": settings.memory_routing_key,
            "LLM_BOT_MEMORY_QUEUE": settings.memory_queue,
            "LLM_BOT_MEMORY_DLQ": settings.memory_dlq,
            "LLM_BOT_LOG_LEVEL": "warning",
        }
    )
    return env


async def _cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        "dlq",
        *args,
        env=_cli_env(settings),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    return int(process.returncode or 0), stdout.decode(), stderr.decode()


async def test_cli_lists_as_json_lines_and_replays_by_code(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The real command: list --json prints one object per dead letter; replay prints a summary."""
    settings = make_settings()
    async with bot(settings) as (_, client):
        _, bad, rejected = await _dead_letter_three(client, fake_model)
        code, out, err = await _cli(settings, "list", "--json")
        assert (code, err) == (0, "")
        rows = [json.loads(line) for line in out.splitlines()]
        assert [row["code"] for row in rows] == ["invalid_event", "invalid_event", "model_error"]
        assert [row["event_id"] for row in rows] == [None, bad["id"], rejected["id"]]
        assert SECRET not in out
        await _wait_depth(client, 3)

        code, out, err = await _cli(settings, "replay", "--code", "model_error")
        assert (code, out, err) == (0, "replayed 1, left 2 (code != model_error)\n", "")
        candidate = await client.next_candidate()
        assert candidate.body["event_id"] == rejected["id"]
        await _wait_depth(client, 2)

        assert (
            await asyncio.to_thread(dlq_cli.run_list, settings.broker, limit=1, as_json=False) == 0
        )
        out = capsys.readouterr().out  # may hold the in-process bot's log lines too
        [line] = [x for x in out.splitlines() if x.startswith("#")]
        assert line.startswith("#1 code=invalid_event attempts=1 size=")
        assert f"1 of 2 dead letters shown from {settings.dlq} (nothing removed)" in out

        missing = settings.model_copy(update={"dlq": "no.such.dlq"})
        assert (
            await asyncio.to_thread(dlq_cli.run_list, missing.broker, limit=5, as_json=False) == 2
        )
        assert "no.such.dlq" in capsys.readouterr().err


async def test_the_memory_workers_dlq_is_listed_and_replayed_with_queue_memory(
    make_settings: Callable[..., Settings],
) -> None:
    """A memory job the worker cannot read is dead-lettered to the memory DLQ; ``dlq list
    --queue memory`` shows it without removing it, ``replay --queue memory`` moves it back
    to the memory-jobs queue (not the events ingress)."""
    settings = make_settings()
    async with integrator(settings) as client:
        async with running_worker(settings):
            await client.exchange.publish(
                aio_pika.Message(b'{"not": "a memory job"}', message_id="job-bad"),
                routing_key=settings.memory_routing_key,
            )
            async with asyncio.timeout(15):
                while await client.queue_depth(settings.memory_dlq) < 1:
                    await asyncio.sleep(0.05)
        code, out, err = await _cli(settings, "list", "--queue", "memory")
        assert code == 0, err
        assert "message_id=job-bad" in out
        assert f"1 of 1 dead letters shown from {settings.memory_dlq}" in out
        assert await client.queue_depth(settings.memory_dlq) == 1
        code, out, err = await _cli(settings, "list")  # the default: the events DLQ
        assert code == 2  # only the worker ran: the service's DLQ was never declared
        assert f"{settings.dlq!r} does not exist" in err
        code, out, err = await _cli(settings, "replay", "--queue", "memory")
        assert code == 0, err
        assert out.strip() == "replayed 1, left 0"
        assert await client.queue_depth(settings.memory_dlq) == 0
        assert await client.queue_depth(settings.memory_queue) == 1  # back where it came from
