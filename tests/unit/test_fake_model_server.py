"""The fake OpenAI-compatible server, driven only through the real ``openai.AsyncOpenAI`` client."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion
from openai.types.responses import ResponseInputParam

from llm_bot.fake_model import DEFAULT_MODEL, FakeModelServer, Fault, RecordedRequest
from llm_bot.fake_model.streaming import text_pieces
from llm_bot.memory.memory_message import memory_message, quote_json

MODEL = "gpt-test"


@pytest.fixture
async def server() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as srv:
        yield srv


@pytest.fixture
async def client(server: FakeModelServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key="any", max_retries=0) as c:
        yield c


async def _chat(client: AsyncOpenAI, text: str, **kwargs: Any) -> str | None:
    completion: ChatCompletion = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], **kwargs
    )
    return completion.choices[0].message.content


async def test_chat_reply_and_usage_parsed(server: FakeModelServer, client: AsyncOpenAI) -> None:
    """A chat completion parses with the echo reply, request model and char/4 token usage."""
    completion = await client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello there"},
        ],
    )
    assert server.base_url.startswith("http://127.0.0.1:")
    assert completion.object == "chat.completion"
    assert completion.model == MODEL
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "echo: hello there"
    assert completion.usage is not None
    prompt_chars = len("be brief\nhello there")
    assert completion.usage.prompt_tokens == math.ceil(prompt_chars / 4)
    assert completion.usage.completion_tokens == math.ceil(len("echo: hello there") / 4)
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


async def test_default_reply_echoes_first_200_chars(client: AsyncOpenAI) -> None:
    """The default responder echoes at most 200 characters of the last user message."""
    assert await _chat(client, "x" * 500) == "echo: " + "x" * 200


async def test_scripted_replies_consumed_in_order_then_default(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """Script steps are consumed FIFO, one per request, then the default responder answers."""
    server.script("first", "second")
    assert await _chat(client, "a") == "first"
    assert server.pending_script == 1
    assert await _chat(client, "b") == "second"
    assert await _chat(client, "c") == "echo: c"


async def test_custom_responder_used_when_script_empty() -> None:
    """A responder passed to the constructor replaces the default echo."""

    def responder(request: RecordedRequest) -> str:
        return f"{len(request.messages())} msgs"

    async with (
        FakeModelServer(responder=responder) as srv,
        AsyncOpenAI(base_url=srv.base_url, api_key="any", max_retries=0) as c,
    ):
        assert await _chat(c, "hi") == "1 msgs"


async def test_failing_responder_answers_500() -> None:
    """A responder that raises yields an OpenAI-style 500 carrying the exception text."""

    def responder(request: RecordedRequest) -> str:
        raise RuntimeError("responder bug")

    async with (
        FakeModelServer(responder=responder) as srv,
        AsyncOpenAI(base_url=srv.base_url, api_key="any", max_retries=0) as c,
    ):
        with pytest.raises(openai.InternalServerError, match="responder bug"):
            await _chat(c, "hi")


async def test_json_mode_returns_scripted_json_verbatim(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """With response_format json_object the scripted JSON string is returned as-is."""
    payload = {"candidates": ["a", "b"]}
    server.script(json.dumps(payload))
    text = await _chat(client, "give json", response_format={"type": "json_object"})
    assert text is not None
    assert json.loads(text) == payload
    assert server.chat_requests()[0].body["response_format"] == {"type": "json_object"}


async def test_responses_api_string_input(server: FakeModelServer, client: AsyncOpenAI) -> None:
    """Responses API with string input yields output_text and usage."""
    response = await client.responses.create(model=MODEL, input="ping")
    assert response.output_text == "echo: ping"
    assert response.status == "completed"
    assert response.model == MODEL
    assert response.usage is not None
    assert response.usage.input_tokens == 1
    assert response.usage.output_tokens == math.ceil(len("echo: ping") / 4)
    assert server.responses_requests()[0].prompt_text() == "ping"


async def test_responses_api_message_list_input(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """Responses API with a message list echoes the last user message and consumes the script."""
    items: ResponseInputParam = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "input_text", "text": "second question"}]},
    ]
    response = await client.responses.create(
        model=MODEL,
        instructions="sys",
        input=items,
    )
    assert response.output_text == "echo: second question"
    recorded = server.responses_requests()[0]
    assert recorded.prompt_text() == "sys\nfirst question\nfirst answer\nsecond question"
    server.script('{"ok": true}')
    scripted = await client.responses.create(model=MODEL, input=items)
    assert json.loads(scripted.output_text) == {"ok": True}


async def test_embeddings_deterministic_and_normalised(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """Embeddings are deterministic, unit length, sized by dimensions, closer for similar text."""
    texts = ["the cat sat on the mat", "the cat sat on a mat", "quantum chromodynamics lecture"]
    first = await client.embeddings.create(model="embed-test", input=texts)
    again = await client.embeddings.create(model="embed-test", input=texts[0])
    floats = await client.embeddings.create(
        model="embed-test", input=texts[0], encoding_format="float"
    )
    sized = await client.embeddings.create(model="embed-test", input="solo", dimensions=16)
    vectors = [d.embedding for d in first.data]
    assert [d.index for d in first.data] == [0, 1, 2]
    assert all(len(v) == 64 for v in vectors)
    for v in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-5)
    assert again.data[0].embedding == vectors[0]
    assert floats.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
    assert len(sized.data[0].embedding) == 16

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert first.usage.prompt_tokens == math.ceil(sum(len(t) for t in texts) / 4)
    assert first.model == "embed-test"
    assert server.pending_script == 0


async def test_embeddings_do_not_consume_script(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """Embedding and model-list requests leave queued script steps for chat requests."""
    server.script("for chat")
    await client.embeddings.create(model="embed-test", input="x")
    models = await client.models.list()
    assert [m.id for m in models.data] == [DEFAULT_MODEL]
    assert await _chat(client, "y") == "for chat"


async def test_429_raises_rate_limit_error(server: FakeModelServer, client: AsyncOpenAI) -> None:
    """A scripted 429 surfaces as openai.RateLimitError with an OpenAI-style error body."""
    server.script(Fault.status(429, "slow down"))
    with pytest.raises(openai.RateLimitError) as exc_info:
        await _chat(client, "hi")
    assert exc_info.value.status_code == 429
    assert exc_info.value.response.headers["retry-after"] == "0"
    assert exc_info.value.code == "rate_limit_exceeded"
    assert "slow down" in exc_info.value.message
    assert len(server.requests) == 1


async def test_500_raises_internal_server_error(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """A scripted 500 surfaces as openai.InternalServerError, then the next request succeeds."""
    server.script(Fault.status(500))
    with pytest.raises(openai.InternalServerError):
        await client.responses.create(model=MODEL, input="hi")
    assert await _chat(client, "after") == "echo: after"


async def test_hang_times_out_and_server_keeps_serving(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """A hang fault triggers APITimeoutError at a 0.5 s client timeout; the next call answers."""
    server.script(Fault.hang())
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.5).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hang"}]
        )
    assert time.monotonic() - started < 2.0
    assert await _chat(client, "next") == "echo: next"
    assert len(server.chat_requests()) == 2


async def test_hang_does_not_block_others_or_stop() -> None:
    """A hung request does not block other requests, and stop() does not wait for it."""
    srv = FakeModelServer()
    await srv.start()
    srv.script(Fault.hang(60))
    async with AsyncOpenAI(base_url=srv.base_url, api_key="any", max_retries=0) as c:
        pending = c.with_options(timeout=5).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hang"}]
        )
        task = asyncio.ensure_future(pending)
        done, _ = await asyncio.wait({task}, timeout=0.3)
        assert not done
        assert await _chat(c, "meanwhile") == "echo: meanwhile"
        assert len(srv.requests) == 2
        started = time.monotonic()
        await srv.stop()
        assert time.monotonic() - started < 1.0
        with pytest.raises(openai.APIError):
            await task


async def test_delay_fault_and_latency(server: FakeModelServer, client: AsyncOpenAI) -> None:
    """Latency delays every chat reply; a delay fault answers its text after waiting."""
    server.set_latency(0.2)
    started = time.monotonic()
    assert await _chat(client, "slow") == "echo: slow"
    assert time.monotonic() - started >= 0.2
    server.set_latency(0.0)
    server.script(Fault.delay(0.2, "late"))
    started = time.monotonic()
    assert await _chat(client, "x") == "late"
    assert time.monotonic() - started >= 0.2


async def test_requests_recorded_with_bodies(server: FakeModelServer, client: AsyncOpenAI) -> None:
    """Every request is recorded in order with path, JSON body and headers; clear() resets."""
    server.script(Fault.status(503))
    with pytest.raises(openai.InternalServerError):
        await _chat(client, "one")
    await _chat(client, "two", temperature=0.5)
    await client.embeddings.create(model="embed-test", input="three")
    paths = [r.path for r in server.requests]
    assert paths == ["/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings"]
    second = server.chat_requests()[1]
    assert second.body["model"] == MODEL
    assert second.body["temperature"] == 0.5
    assert second.messages() == [{"role": "user", "content": "two"}]
    assert second.headers["authorization"] == "Bearer any"
    assert server.requests[0].received_at <= second.received_at
    server.script("unused")
    server.clear()
    assert server.requests == []
    assert server.pending_script == 0


async def test_chat_stream_in_pieces_paced_with_usage(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    server.script("a streamed reply in several pieces")
    server.set_stream_rate(100)
    started = time.perf_counter()
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    elapsed = time.perf_counter() - started
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == "a streamed reply in several pieces"
    assert pieces == text_pieces("a streamed reply in several pieces")
    assert len(pieces) == 8  # words, long ones in runs of 6 characters
    assert elapsed >= 8 / 100  # paced: one piece per 10 ms
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


async def test_responses_stream_deltas_then_completed(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    server.script("two words")
    stream = await client.responses.create(model=MODEL, input="hi", stream=True)
    events = [event async for event in stream]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "two words"
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "two words"


async def test_cut_fault_drops_the_stream_after_n_pieces(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    server.script(Fault.cut(2, "one two three four"))
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)

    with pytest.raises(Exception) as broken:  # noqa: PT011  # the transport's error type
        await read()
    assert pieces == ["one", " two"]
    assert not isinstance(broken.value, AssertionError)
    assert await _chat(client, "still serving") == "echo: still serving"


def test_the_memory_message_is_read_as_memory_never_as_what_the_user_said() -> None:
    """``memory()`` parses the memory message; ``window()`` and ``last_user_text()`` (what
    the default responder echoes) leave it out, even when it is the only user message."""
    memory = memory_message(quote_json({"facts": ["Likes tea."]}))
    system = {"role": "system", "content": "Be brief."}
    said = {"role": "user", "content": "hello"}

    def request(*messages: Any) -> RecordedRequest:
        body = {"model": DEFAULT_MODEL, "messages": list(messages)}
        return RecordedRequest("/v1/chat/completions", body, {}, 0.0)

    full = request(system, memory, said)
    assert full.memory() == {"facts": ["Likes tea."]}
    assert full.window() == [said]
    assert full.last_user_text() == "hello"
    alone = request(system, memory)
    assert alone.last_user_text() == ""
    assert request(system, said).memory() is None


async def test_requests_started_returns_once_the_model_was_asked(
    server: FakeModelServer, client: AsyncOpenAI
) -> None:
    """``requests_started`` wakes as a request arrives, before its latency has passed, and
    times out when none comes."""
    server.set_latency(5.0)
    asked = asyncio.create_task(_chat(client, "slow"))
    [started] = await server.requests_started(1, within=3.0)
    assert started.body["messages"][0]["content"] == "slow"
    assert not asked.done()
    asked.cancel()
    with pytest.raises(TimeoutError):
        await server.requests_started(2, within=0.1)
