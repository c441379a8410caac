"""The gateway's front door is bounded (issue 26, 1): body size, nesting, history length and
ids, each refused with an OpenAI-style error before anything is published; headers, bodies,
idle connections and whole requests each have a deadline, and a slow client never holds up
another's request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.gateway import http_protocol, request_body
from llm_bot.gateway.openai_wire import MAX_MESSAGES
from tests.support.events import new_id
from tests.support.gateway import TENANT_KEYS, gateway_settings, running_gateway
from tests.support.harness import bot

pytestmark = pytest.mark.integration


def _settings(make_settings: Callable[..., Settings], **overrides: Any) -> Settings:
    return gateway_settings(make_settings, **{"gateway_timeout_seconds": 5, **overrides})


async def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    headers = {
        "Authorization": f"Bearer {TENANT_KEYS['tenant_a']}",
        "Content-Type": "application/json",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/chat/completions", data=body, headers=headers) as response,
    ):
        return response.status, await response.json()


def _request(messages: list[dict[str, str]], user: str = "u1") -> dict[str, Any]:
    return {
        "model": "llm-bot",
        "messages": messages,
        "user": user,
        "metadata": {"conversation_id": new_id("c")},
    }


async def test_oversize_deep_long_and_malformed_requests_are_refused_before_publishing(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Over LLM_BOT_MAX_BODY_BYTES: 413; JSON nested past 32 levels: 400 (never a 500); more
    than MAX_MESSAGES messages: 400 naming ``messages``; a user id with a trailing newline:
    400 naming ``user``. Nothing reaches the model."""
    settings = _settings(make_settings, max_body_bytes=4096)
    async with running_gateway(settings) as gateway:
        url = gateway.base_url
        big = json.dumps(_request([{"role": "user", "content": "x" * 5000}])).encode()
        status, body = await _post(url, big)
        assert status == 413
        assert "4096" in body["error"]["message"]
        deep = b'{"model": "llm-bot", "messages": ' + b"[" * 1000 + b"]" * 1000 + b"}"
        status, body = await _post(url, deep)
        assert status == 400
        assert "nests deeper" in body["error"]["message"]
    async with running_gateway(_settings(make_settings)) as gateway:
        many = [{"role": "user", "content": "a"}] * (MAX_MESSAGES + 1)
        status, body = await _post(gateway.base_url, json.dumps(_request(many)).encode())
        assert status == 400
        assert body["error"]["param"].startswith("messages")
        newline = json.dumps(_request([{"role": "user", "content": "hi"}], user="u1\n"))
        status, body = await _post(gateway.base_url, newline.encode())
        assert status == 400
        assert "user" in body["error"]["message"]
    assert fake_model.chat_requests() == []


async def test_a_body_sent_too_slowly_is_408_and_others_are_served_meanwhile(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that sends its body a byte at a time past the read deadline gets 408;
    another client's request is answered while it dawdles."""
    monkeypatch.setattr(request_body, "BODY_READ_SECONDS", 0.5)
    settings = _settings(make_settings)
    async with bot(settings), running_gateway(settings) as gateway:
        port = gateway.port
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps(_request([{"role": "user", "content": "slow"}])).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {TENANT_KEYS['tenant_a']}\r\n".encode()
            + b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        await writer.drain()
        status, answer = await _post(
            gateway.base_url, json.dumps(_request([{"role": "user", "content": "hi"}])).encode()
        )
        assert status == 200
        assert answer["choices"][0]["message"]["content"] == "echo: hi"
        head = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
    assert b" 408 " in head


async def _served_beside(url: str) -> None:
    """A normal request, answered while a slow client dawdles."""
    status, answer = await _post(
        url, json.dumps(_request([{"role": "user", "content": "hi"}])).encode()
    )
    assert status == 200
    assert answer["choices"][0]["message"]["content"] == "echo: hi"


async def test_headers_sent_a_line_a_second_are_cut_off_and_others_are_served(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client sending a header line a second gets 408 and a closed connection within the
    header deadline (2 s here), while a normal request is served meanwhile."""
    monkeypatch.setattr(http_protocol, "HEADER_READ_SECONDS", 2.0)
    settings = _settings(make_settings)
    async with bot(settings), running_gateway(settings) as gateway:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        opened = time.monotonic()

        async def drip() -> None:
            lines = [b"POST /v1/chat/completions HTTP/1.1\r\n", b"Host: x\r\n"]
            lines += [b"X-Slow-%d: y\r\n" % n for n in range(30)]
            with contextlib.suppress(ConnectionError):
                for line in lines:
                    writer.write(line)
                    await writer.drain()
                    await asyncio.sleep(1.0)

        dripping = asyncio.create_task(drip())
        await _served_beside(gateway.base_url)
        head = await asyncio.wait_for(reader.readline(), 6)
        rest = await asyncio.wait_for(reader.read(), 2)
        cut_after = time.monotonic() - opened
        dripping.cancel()
        writer.close()
    assert b" 408 " in head
    assert b'"code": "headers_timeout"' in rest
    assert cut_after < 3.5


async def test_idle_connections_are_closed(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection that sends nothing is closed at the header deadline (1 s here) without
    a response; a kept-alive one, idle after its response, within uvicorn's 5 s."""
    monkeypatch.setattr(http_protocol, "HEADER_READ_SECONDS", 1.0)
    settings = _settings(make_settings)
    async with running_gateway(settings) as gateway:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        opened = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 3) == b""
        assert time.monotonic() - opened < 2.0
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
        assert b" 401 " in answered
        idle = time.monotonic()
        with contextlib.suppress(ConnectionError):
            while await asyncio.wait_for(reader.read(65536), 8):
                pass
        assert time.monotonic() - idle < 7.0
        writer.close()


async def test_a_request_past_its_whole_deadline_is_504_and_closed(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past LLM_BOT_GATEWAY_TIMEOUT_SECONDS plus the response grace (2 s + 0.5 s here), a
    request still unanswered is 504 ``timeout`` with a request id and its connection is
    closed, whatever the app was waiting on (here a body dripping in under a long body
    deadline); a normal request is served meanwhile."""
    monkeypatch.setattr(request_body, "BODY_READ_SECONDS", 30.0)
    monkeypatch.setattr(http_protocol, "RESPONSE_GRACE_SECONDS", 0.5)
    settings = _settings(make_settings, gateway_timeout_seconds=2)
    async with bot(settings), running_gateway(settings) as gateway:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        body = json.dumps(_request([{"role": "user", "content": "slow"}])).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {TENANT_KEYS['tenant_a']}\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        await writer.drain()
        sent = time.monotonic()
        await _served_beside(gateway.base_url)
        answer = await asyncio.wait_for(reader.read(), 5)
        waited = time.monotonic() - sent
        writer.close()
    head, _, error = answer.partition(b"\r\n\r\n")
    assert b" 504 " in head
    assert json.loads(error)["error"]["code"] == "timeout"
    assert json.loads(error)["error"]["request_id"].startswith("req_")
    assert 2.0 < waited < 4.5


async def test_a_response_still_streaming_at_the_whole_deadline_is_cut_off(
    make_settings: Callable[..., Settings],
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A response already started but still being written at the whole-request deadline
    has its connection closed: the stream ends without ``[DONE]``. The deadline is set
    below the reply wait here (a 4 s timeout with a grace of -2 s), so that a slowly
    streamed reply is still running when it passes; in service it catches a client that
    stopped reading."""
    monkeypatch.setattr(http_protocol, "RESPONSE_GRACE_SECONDS", -2.0)
    settings = _settings(make_settings, gateway_timeout_seconds=4)
    fake_model.set_stream_rate(10)
    fake_model.script(" ".join(f"w{n}" for n in range(45)))  # about 4.5 s of stream
    async with bot(settings), running_gateway(settings) as gateway:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        request = _request([{"role": "user", "content": "stream slowly"}])
        body = json.dumps({**request, "stream": True}).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {TENANT_KEYS['tenant_a']}\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        sent = time.monotonic()
        received = b""
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), 6):
                received += chunk
        waited = time.monotonic() - sent
        writer.close()
    assert received.startswith(b"HTTP/1.1 200")
    assert b'"content": "w0' in received  # the stream had started
    assert b"[DONE]" not in received
    assert b'"code": "timeout"' not in received  # cut by the deadline, not the reply wait
    assert 1.5 < waited < 3.5
