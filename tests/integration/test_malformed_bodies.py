"""Hypothesis-generated malformed bodies never crash or stall the consumer."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NonInteractiveExampleWarning

from llm_bot.config import Settings
from llm_bot.errors import InvalidEvent
from llm_bot.service.parsing import parse_event
from tests.support.events import encode, message_event, new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration

MAX_BODY = 8192


def _valid() -> dict[str, Any]:
    return message_event(tenant="tmal", user="u1", conversation="c1", text="hello")


def _mutate(field: str, value: Any) -> bytes:
    event = _valid()
    event[field] = value
    return encode(event)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
malformed = st.one_of(
    st.binary(max_size=300),  # random bytes, mostly non-UTF-8 or non-JSON
    st.builds(lambda n: encode(_valid())[:n], st.integers(min_value=0, max_value=60)),  # truncated
    st.builds(lambda v: json.dumps(v).encode(), json_values),  # JSON of the wrong shape
    st.builds(
        _mutate,
        st.sampled_from(
            [
                "id",
                "tenant_id",
                "user_id",
                "conversation_id",
                "type",
                "created_at",
                "annotations",
                "schema",
            ]
        ),
        json_values,
    ),  # one field of the wrong type
    st.builds(
        lambda s: _mutate("tenant_id", s),
        st.text(min_size=1, max_size=140).filter(
            lambda s: not s[:1].isalnum() or any(c in s for c in "/{}|* \\n")
        ),
    ),  # bad ids
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(min_value=200, max_value=5000)),  # nesting
    st.just(b"{" + b'"a":' * 3000 + b"1" + b"}" * 3000),
    st.builds(
        lambda n: encode(message_event(tenant="t", user="u", conversation="c", text="x" * n)),
        st.integers(min_value=MAX_BODY, max_value=MAX_BODY * 4),
    ),  # oversize
)


@given(body=malformed)
@settings(
    max_examples=int(os.environ.get("LLMBOT_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_parse_event_rejects_malformed_bodies_with_a_clear_error(body: bytes) -> None:
    """Every malformed body raises InvalidEvent (never anything else) with a message."""
    try:
        parse_event(body, max_bytes=MAX_BODY)
    except InvalidEvent as exc:
        message = str(exc)
    else:
        message = "valid"  # a mutated field can happen to be valid (e.g. a matching id)
    assert message


async def test_malformed_bodies_are_dead_lettered_and_valid_events_around_them_answered(
    make_settings: Callable[..., Settings],
) -> None:
    """60 generated bad bodies between valid events: each bad one dead-lettered as
    invalid_event, every valid one answered, no crash, no hang."""
    with warnings.catch_warnings():  # .example() is the simplest way to draw a fixed batch
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        bodies = [b for b in (malformed.example() for _ in range(300)) if _is_invalid(b)][:60]
    assert len(bodies) == 60
    user = new_id("u")
    valid = [
        message_event(tenant="tmal", user=user, conversation=new_id("c"), text=f"ok {i}")
        for i in range(len(bodies) + 1)
    ]
    async with bot(make_settings(max_body_bytes=MAX_BODY, prefetch=16)) as (_, client):
        await client.publish(valid[0])
        for body, event in zip(bodies, valid[1:], strict=True):
            await client.publish(body)
            await client.publish(event)
        answered = {(await client.next_candidate(within=30)).body["event_id"] for _ in valid}
        dead = await client.dead_letters(len(bodies), within=30)
    assert answered == {e["id"] for e in valid}
    assert sorted(m.body for m in dead) == sorted(bodies)
    assert {m.headers["x-error-code"] for m in dead} == {"invalid_event"}
    assert all(m.headers["x-error-message"] for m in dead)


def _is_invalid(body: bytes) -> bool:
    try:
        parse_event(body, max_bytes=MAX_BODY)
    except InvalidEvent:
        return True
    return False
