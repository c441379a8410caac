"""Outcomes for events that get no reply: SKIP, and invalid input dead-lettered."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import encode, message_event, new_id
from tests.support.harness import Integrator, bot
from tests.support.settled import settled

pytestmark = pytest.mark.integration


async def _still_answers(client: Integrator, tenant: str = "tok") -> None:
    """A valid event after the bad one is answered."""
    event = message_event(
        tenant=tenant, user=new_id("u"), conversation=new_id("c"), text="are you there?"
    )
    await client.publish(event)
    candidate = await client.next_candidate()
    assert candidate.body["event_id"] == event["id"]


async def test_event_without_prompt_text_is_skipped_then_a_valid_one_answered(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """SKIP: no candidate, no model call, no dead letter, acked; the consumer goes on."""
    blank = message_event(tenant="tskip", user=new_id("u"), conversation=new_id("c"), text="   ")
    no_annotations = message_event(
        tenant="tskip", user=new_id("u"), conversation=new_id("c"), text=None
    )
    async with bot(make_settings()) as (service, client):
        await client.publish(blank)
        await client.publish(no_annotations)
        await _still_answers(client)
        assert await settled(service.metrics, 3) == 3  # the two skips acked, nothing more
        assert client.candidates.empty()
        assert client.errors.empty()
        assert await client.ingress_depth() == 0
        assert await client.queue_depth(client.settings.dlq) == 0
    assert len(fake_model.chat_requests()) == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"schema": "internal.event.v2", "id": ', "invalid JSON"),
        (b"\xff\xfe not utf-8", "not valid UTF-8"),
        (b"[" * 50000, "invalid JSON"),
        (b"null", "schema violation"),
    ],
    ids=["truncated-json", "non-utf8", "deep-nesting", "not-an-object"],
)
async def test_unreadable_body_is_dead_lettered_without_error_event(
    make_settings: Callable[..., Settings], body: bytes, reason: str
) -> None:
    """Unreadable bodies → DLQ with x-error-code invalid_event; no ErrorV1 (ids unreadable)."""
    async with bot(make_settings()) as (_, client):
        await client.publish(body)
        [dead] = await client.dead_letters(1)
        assert dead.body == body
        assert dead.headers["x-error-code"] == "invalid_event"
        assert reason in str(dead.headers["x-error-message"])
        assert dead.headers["x-attempts"] == 1
        await _still_answers(client)
        assert client.errors.empty()


async def test_schema_violation_with_readable_ids_publishes_error_v1(
    make_settings: Callable[..., Settings],
) -> None:
    """A schema violation whose ids are readable gives ErrorV1 invalid_event and a dead letter."""
    event = message_event(tenant="tbad", user=new_id("u"), conversation=new_id("c"), text="x")
    event["type"] = "shout"
    event["annotations"] = "secret-looking-text"
    async with bot(make_settings()) as (_, client):
        await client.publish(event)
        error = await client.next_error()
        assert error.body["code"] == "invalid_event"
        assert error.body["event_id"] == event["id"]
        assert error.body["attempts"] == 1
        assert "type" in error.body["message"]
        assert "secret-looking-text" not in error.body["message"]
        [dead] = await client.dead_letters(1)
        assert dead.body == encode(event)
        assert dead.headers["x-error-code"] == "invalid_event"
        await _still_answers(client)


async def test_oversize_body_is_dead_lettered(make_settings: Callable[..., Settings]) -> None:
    """A body over LLM_BOT_MAX_BODY_BYTES is invalid_event, whatever it contains."""
    event = message_event(
        tenant="tbig", user=new_id("u"), conversation=new_id("c"), text="x" * 5000
    )
    async with bot(make_settings(max_body_bytes=4096)) as (_, client):
        await client.publish(event)
        [dead] = await client.dead_letters(1)
        assert dead.headers["x-error-code"] == "invalid_event"
        assert "limit" in str(dead.headers["x-error-message"])
        await _still_answers(client)
        assert client.errors.empty()


@pytest.mark.parametrize(
    "field_value",
    [("tenant_id", "../other"), ("user_id", "u{x}"), ("conversation_id", "*"), ("id", "")],
    ids=["path-in-tenant", "brace-in-user", "star-conversation-on-message", "empty-id"],
)
async def test_bad_ids_are_invalid_events(
    make_settings: Callable[..., Settings], field_value: tuple[str, str]
) -> None:
    """Ids outside the SPEC pattern are rejected before any key is built."""
    field, value = field_value
    event = message_event(tenant="tids", user=new_id("u"), conversation=new_id("c"), text="x")
    event[field] = value
    async with bot(make_settings()) as (service, client):
        await client.publish(event)
        [dead] = await client.dead_letters(1)
        assert dead.headers["x-error-code"] == "invalid_event"
        prefix = service.settings.redis_key_prefix
        assert await service.redis.keys(f"{prefix}:{{tids|*") == []
        await _still_answers(client)
