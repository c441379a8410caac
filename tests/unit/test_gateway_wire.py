"""The gateway's pure parts: API keys, request validation, what a streaming client is sent."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import ClientDisconnect

from llm_bot.config import ConfigurationError, load_settings
from llm_bot.contract import ErrorV1
from llm_bot.contract.stream_text import StreamText
from llm_bot.gateway.api_keys import ApiKeys, key_digest
from llm_bot.gateway.openai_wire import WireError, parse_request
from llm_bot.gateway.sse_stream import ClosingStream


def test_api_keys_map_digests_to_tenants() -> None:
    keys = ApiKeys.parse(f"shop_1={key_digest('k1')}, shop_2={key_digest('k2')},")
    assert keys.tenant_for("k1") == "shop_1"
    assert keys.tenant_for("k2") == "shop_2"
    assert keys.tenant_for("k3") is None
    assert keys.tenant_for("") is None
    assert not ApiKeys.parse("")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("shop_1=sk-plaintext", "entry 1 is not tenant=sha256"),
        (f"shop_1={key_digest('k')},nonsense", "entry 2"),
        (f"bad tenant={key_digest('k')}", "entry 1"),
        (f"-x={key_digest('k')}", "not a valid id"),
    ],
)
def test_api_key_configuration_errors_name_the_entry(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        ApiKeys.parse(text)
    with pytest.raises(ConfigurationError, match="LLM_BOT_GATEWAY_KEYS"):
        load_settings(gateway_keys=text)


def _body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llm-bot",
        "messages": [{"role": "user", "content": "hello"}],
        "user": "u1",
        "metadata": {"conversation_id": "c1"},
    }
    body.update(fields)
    return body


def test_request_takes_only_the_newest_user_message() -> None:
    request = parse_request(
        _body(
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "old"},
                {"role": "assistant", "content": "reply"},
                {"role": "user", "content": [{"type": "text", "text": "new"}]},
            ],
            temperature=0.2,
            metadata={"conversation_id": "c1", "channel": "voice"},
        ),
        {},
    )
    assert (request.text, request.user_id, request.conversation_id) == ("new", "u1", "c1")
    assert request.metadata == {"channel": "voice"}
    assert not request.stream


def test_user_and_conversation_from_headers() -> None:
    request = parse_request(
        _body(user=None, metadata=None), {"x-user-id": "u9", "x-conversation-id": "c9"}
    )
    assert (request.user_id, request.conversation_id) == ("u9", "c9")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": "  "}]}, "messages.0.content"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages.0.role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages.0.content",
        ),
        ({"user": None}, "user"),
        ({"user": "has spaces"}, "user"),
        ({"metadata": {}}, "metadata.conversation_id"),
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"model": ""}, "model"),
        ({"stream": "yes please"}, "stream"),
    ],
)
def test_bad_requests_name_the_parameter(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as refused:
        parse_request(_body(**fields), {})
    assert refused.value.status == 400
    assert refused.value.param == param
    assert refused.value.body()["error"]["type"] == "invalid_request_error"


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(WireError, match="JSON object"):
        parse_request([1, 2], {})


def test_stream_continues_a_retry_that_repeats_the_text() -> None:
    text = StreamText()
    assert [text.delta(n, p) for n, p in enumerate(["one", " two"])] == ["one", " two"]
    # the call broke off; the retry streams from 0 again, the same words and more
    assert [text.delta(n, p) for n, p in enumerate(["one", " two", " three"])] == [
        "",
        "",
        " three",
    ]
    assert text.final("one two three four") == " four"


def test_stream_stops_when_a_retry_says_something_else() -> None:
    text = StreamText()
    assert text.delta(0, "alpha") == "alpha"
    assert text.delta(0, "beta") == ""
    assert text.delta(1, " gamma") == ""
    assert text.final("beta gamma") is None


def test_a_lost_delta_mutes_the_stream_and_the_final_fills_in() -> None:
    text = StreamText()
    assert text.delta(0, "a") == "a"
    assert text.delta(2, "c") == ""
    assert text.final("abc") == "bc"


@given(
    final=st.text(min_size=1, max_size=30),
    attempts=st.lists(
        st.tuples(st.text(max_size=30), st.lists(st.integers(1, 5), max_size=8)),
        max_size=3,
    ),
)
def test_the_client_never_sees_two_texts(final: str, attempts: list[tuple[str, list[int]]]) -> None:
    """Whatever failed attempts streamed before the final call, what the client receives
    is a prefix of one text, and when the stream completes it is exactly the final text."""
    text = StreamText()
    received = ""
    for attempt, cuts in [*attempts, (final, [1] * len(final))]:
        position, seq = 0, 0
        for size in cuts:
            piece = attempt[position : position + size]
            if not piece:
                break
            received += text.delta(seq, piece)
            position, seq = position + size, seq + 1
        assert any(t.startswith(received) for t in [final, *(a for a, _ in attempts)])
    rest = text.final(final)
    if rest is not None:
        assert received + rest == final
    else:
        assert not final.startswith(received)


async def test_a_stream_whose_client_left_before_its_body_started_still_closes() -> None:
    """Starlette cancels a streaming response whose client is gone, possibly before the
    body generator ran: the reply wait and the metrics must still be released."""
    started: list[bool] = []
    closed: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        started.append(True)
        yield b"data: never\n\n"

    async def on_close() -> None:
        closed.append(True)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        raise OSError("the client is gone")

    response = ClosingStream(body(), on_close=on_close, media_type="text/event-stream", headers={})
    with contextlib.suppress(OSError, ClientDisconnect):
        await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert closed == [True]
    assert started == []


def test_a_service_error_reaches_the_client_as_its_codes_stable_text() -> None:
    """A provider's or the service's own text stays in ``detail`` (logged), never in the
    body; an invalid event's reason (about the request) is passed on."""
    failed = ErrorV1.model_validate(
        {
            "schema": "llmbot.error.v1",
            "event_id": "e1",
            "tenant_id": "t",
            "user_id": "u",
            "conversation_id": "c",
            "code": "model_error",
            "message": "model returned HTTP 401: key sk-live-123 revoked",
            "attempts": 1,
            "created_at": "2026-11-25T00:00:00Z",
        }
    )
    error = WireError.from_error_event(failed)
    assert (error.status, error.code) == (502, "model_error")
    assert "sk-live-123" not in str(error.body("req_1"))
    assert error.body("req_1")["error"]["request_id"] == "req_1"
    assert error.detail == failed.message
    invalid = WireError.from_error_event(
        failed.model_copy(update={"code": "invalid_event", "message": "metadata.persona: x"})
    )
    assert (invalid.status, invalid.message) == (400, "metadata.persona: x")
    refused = WireError.from_error_event(
        failed.model_copy(update={"code": "budget_exceeded", "message": "tenant t spent"})
    )
    assert refused.status == 429
    assert refused.body()["error"]["type"] == "insufficient_quota"
    assert refused.body()["error"]["code"] == "insufficient_quota"


def test_a_user_bound_caller_cannot_name_another_user() -> None:
    assert parse_request(_body(user=None), {}, bound_user="alice").user_id == "alice"
    assert parse_request(_body(user="alice"), {}, bound_user="alice").user_id == "alice"
    for body, headers in ((_body(user="bob"), {}), (_body(user=None), {"x-user-id": "bob"})):
        with pytest.raises(WireError) as refused:
            parse_request(body, headers, bound_user="alice")
        assert (refused.value.status, refused.value.code) == (403, "user_not_allowed")
