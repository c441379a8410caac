"""``llm_bot.client`` against the real broker and the service (in-process): ask, stream,
tool calls, transcripts, forget, a refused event, an ErrorV1, and a lost connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypedDict

import pytest

from llm_bot.bootstrap import Service
from llm_bot.client import Client, EventFailed, EventInvalid, NotDelivered
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, ToolCalls
from llm_bot.fake_model.scripts import Fault
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration


@asynccontextmanager
async def client_of(settings: Settings) -> AsyncIterator[Client]:
    async with Client(
        settings.amqp_url.get_secret_value(),
        exchange=settings.ingress_exchange,
        routing_key=settings.ingress_routing_key,
        timeout=30,
    ) as client:
        yield client


class Ids(TypedDict):
    tenant: str
    user: str
    conversation: str


def _ids() -> Ids:
    return {"tenant": "tclient", "user": new_id("u"), "conversation": new_id("c")}


async def test_ask_returns_each_callers_own_candidate(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    async with bot(settings), client_of(settings) as client:
        ids = _ids()
        first, second = await asyncio.gather(
            client.ask("How much is the blue kettle?", **ids),
            client.ask("And the red one?", **_ids()),
        )
        third = await client.ask("Thanks", **ids)
    assert first.text == "echo: How much is the blue kettle?"
    assert second.text == "echo: And the red one?"
    assert (first.tenant_id, first.user_id, first.turn) == ("tclient", ids["user"], 1)
    assert third.turn == 2


async def test_stream_yields_the_reply_piece_by_piece(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    text = "Tell me about the blue kettle and the red one, please"
    async with bot(settings), client_of(settings) as client:
        pieces = [piece async for piece in client.stream(text, **_ids())]
    assert len(pieces) > 1
    assert "".join(pieces) == f"echo: {text}"


async def test_a_bad_event_fails_in_the_caller_with_the_services_own_message(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    bad = {
        "schema": "internal.event.v2",
        "id": new_id("evt"),
        "type": "message",
        "tenant_id": "tclient",
        "user_id": "u1",
        "conversation_id": "c1",
        "created_at": "2026-11-23T10:00:00Z",
        "annotations": [{"kind": "prompt", "text": "hi"}],
        "tools": [{"type": "function", "function": {"name": "not a name"}}],
    }
    async with bot(settings) as (_, integrator), client_of(settings) as client:
        with pytest.raises(EventInvalid) as refused:
            await client.publish(bad)
        await integrator.publish(bad)
        error = await integrator.next_error()
    assert error.body["code"] == "invalid_event"
    assert error.body["message"] == str(refused.value)
    assert str(refused.value).startswith("schema violation: tools.0.function.name")


async def test_an_event_the_service_gave_up_on_raises_its_error(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(*[Fault.status(503)] * 2)
    settings = make_settings(max_attempts=2, retry_base_seconds=0.02)
    async with bot(settings), client_of(settings) as client:
        with pytest.raises(EventFailed) as failed:
            await client.ask("hello?", **_ids())
    assert failed.value.error.code == "model_error"


async def test_without_the_service_nothing_takes_the_event(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    async with client_of(settings) as client:
        with pytest.raises(NotDelivered, match="is llm-bot running"):
            await client.ask("anyone?", **_ids())


async def test_answer_tool_returns_the_next_candidate_after_the_rounds_last_result(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.script(
        ToolCalls.of(("lookup_order", "{}"), ("track_parcel", "{}"), ids=("c1", "c2")),
        "It is packed and on its way.",
    )
    tools = [
        {"type": "function", "function": {"name": "lookup_order"}},
        {"type": "function", "function": {"name": "track_parcel"}},
    ]
    settings = make_settings()
    async with bot(settings), client_of(settings) as client:
        calls = await client.ask("Where is order 4471?", tools=tools, **_ids())
        assert calls.kind == "tool_call"
        assert calls.tool_calls is not None
        first, last = calls.tool_calls
        assert await client.answer_tool(first, {"status": "packed"}, of=calls) is None
        reply = await client.answer_tool(last, "in transit", of=calls)
    assert reply is not None
    assert (reply.kind, reply.text) == ("text", "It is packed and on its way.")


async def test_import_transcript_then_forget(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    ids = _ids()
    key = ConversationKey(ids["tenant"], ids["user"], ids["conversation"])
    history = [
        {"role": "user", "text": "I went to a support group yesterday."},
        {"role": "assistant", "text": "How was it?"},
    ]
    async with bot(settings) as (service, _), client_of(settings) as client:
        imported = await client.import_transcript(history, **ids)
        assert len(imported) == 1
        trace = await _wait_for(service, key, lambda t: len(t) == 2)
        assert [m.content for m in trace] == [m["text"] for m in history]
        await client.forget(tenant=ids["tenant"], user=ids["user"])
        assert await _wait_for(service, key, lambda t: not t) == []


async def _wait_for(
    service: Service, key: ConversationKey, done: Callable[[list[Any]], bool]
) -> list[Any]:
    async with asyncio.timeout(15):
        while True:
            trace = await service.store.raw_trace(key)
            if done(trace):
                return trace
            await asyncio.sleep(0.05)


async def test_a_lost_connection_is_reconnected_and_the_reply_still_arrives(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The connection drops while the model answers: the client reconnects, asks again
    with the same event id, and gets the stored candidate (one turn, not two)."""
    fake_model.set_latency(1.0)
    settings = make_settings()
    async with bot(settings) as (_, integrator), client_of(settings) as client:
        asking = asyncio.create_task(client.ask("Still there?", **_ids()))
        await asyncio.sleep(0.3)
        await _drop_connection(client)
        reply = await asyncio.wait_for(asking, 30)
        candidates = [await integrator.next_candidate() for _ in range(2)]
    assert reply.text == "echo: Still there?"
    assert reply.turn == 1
    assert {c.body["id"] for c in candidates} == {reply.id}  # republished, not answered twice


async def _drop_connection(client: Client) -> None:
    """Close the client's AMQP connection under it, as a broker or network failure would."""
    connection = client._connection  # the test's only way to cut the wire
    assert connection is not None
    transport = connection.transport
    assert transport is not None
    await transport.connection.close(ConnectionError("cut by the test"))
