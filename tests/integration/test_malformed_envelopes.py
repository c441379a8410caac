"""Properties and headers are input: a bad one costs its own message, never a neighbour's.

Poison is published the way any AMQP client can send it: bytes that are not UTF-8 in a
short string (``message_id``, ``type``, a header name), a ``traceparent`` of type ``S``
holding such bytes (Java clients send ``byte[]`` so), a timestamp past year 9999. The
service's consumer runs in this process with ``amqp_text.install()``, which also lets this
test's publisher put those bytes on the wire (surrogate escapes encode back to them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.adapters import amqp_text
from llm_bot.config import Settings
from tests.support.events import message_event, new_id
from tests.support.harness import bot
from tests.support.poison import POISONS
from tests.support.settled import settled

pytestmark = pytest.mark.integration


async def test_each_malformed_property_or_header_costs_only_its_own_message(
    make_settings: Callable[..., Settings],
) -> None:
    """Nine kinds of poison among 45 good events, 16 in flight, a delivery limit of 1 (one
    dropped connection would dead-letter the window): every good event answered once,
    each poison dead-lettered as invalid_event with the reason, its original bytes, an
    ErrorV1 (its body's ids are readable), and counted."""
    amqp_text.install()
    registry = CollectorRegistry()
    user = new_id("u")

    def event(text: str) -> dict[str, Any]:
        return message_event(tenant="tenv", user=user, conversation=new_id("c"), text=text)

    poisoned = {kind: event(f"poison {kind}") for kind in POISONS}
    good = [event(f"good {i}") for i in range(5 * len(POISONS))]
    settings = make_settings(prefetch=16, delivery_limit=1)
    async with bot(settings, registry=registry) as (service, client):
        for i, (kind, (properties, _)) in enumerate(POISONS.items()):
            for innocent in good[5 * i : 5 * i + 5]:
                await client.publish(innocent)
            await client.publish(poisoned[kind], **properties)
        answered = [(await client.next_candidate(within=30)).body["event_id"] for _ in good]
        errors = [await client.next_error(within=30) for _ in POISONS]
        dead = await client.dead_letters(len(POISONS), within=30)
        total = len(good) + len(POISONS)
        assert await settled(service.metrics, total) == total  # each once: none on its way
        assert client.candidates.empty()
        assert await client.queue_depth(settings.dlq) == 0
        assert service.consumer.readiness() is None

    assert sorted(answered) == sorted(e["id"] for e in good)
    by_event = {json.loads(m.body)["id"]: m for m in dead}
    assert set(by_event) == {e["id"] for e in poisoned.values()}
    for kind, (properties, reason) in POISONS.items():
        letter = by_event[poisoned[kind]["id"]]
        assert letter.headers["x-error-code"] == "invalid_event", kind
        assert reason in str(letter.headers["x-error-message"]), kind
        for name in ("message_id", "correlation_id", "type", "app_id"):
            if name in properties:  # the dead-letter copy carries the original bytes
                assert getattr(letter, name) == properties[name], kind
    assert {e.body["event_id"] for e in errors} == {e["id"] for e in poisoned.values()}
    assert {e.body["code"] for e in errors} == {"invalid_event"}
    assert registry.get_sample_value("llmbot_dead_letters_total", {"code": "invalid_event"}) == len(
        POISONS
    )
