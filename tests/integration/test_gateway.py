"""``llm-bot gateway`` through the official openai SDK (and curl), in front of the real
service on real RabbitMQ and Redis, with the fake model streaming over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, Fault
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.gateway import (
    TENANT_KEYS,
    gateway_settings,
    running_gateway,
    sdk_client,
)
from tests.support.harness import bot, running_service

pytestmark = pytest.mark.integration


def _settings(make_settings: Callable[..., Settings], **overrides: Any) -> Settings:
    return gateway_settings(
        make_settings, retry_base_seconds=0.05, retry_max_seconds=0.1, **overrides
    )


async def _read_into(stream: openai.AsyncStream[Any], pieces: list[str]) -> None:
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)


async def _streamed_text(
    client: openai.AsyncOpenAI, text: str, *, user: str, conversation: str, **extra: Any
) -> str:
    """Ask ``text`` with ``stream=True`` and return the text the stream carried."""
    stream = await client.chat.completions.create(
        model="llm-bot",
        messages=_history(text),
        user=user,
        metadata={"conversation_id": conversation},
        stream=True,
        **extra,
    )
    assert isinstance(stream, openai.AsyncStream)  # stream=True, whatever ``extra`` holds
    pieces: list[str] = []
    await _read_into(stream, pieces)
    return "".join(pieces)


def _history(*texts: str) -> list[ChatCompletionMessageParam]:
    """A client's history: alternating user/assistant, ending with the user's newest."""
    history: list[ChatCompletionMessageParam] = []
    for n, text in enumerate(texts):
        if n % 2:
            history.append({"role": "assistant", "content": text})
        else:
            history.append({"role": "user", "content": text})
    return history


async def test_non_streaming_reply_and_only_the_newest_message_is_remembered(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Two requests of one conversation, the second resending the whole history: the
    second model call sees each earlier message exactly once (memory is server-side)."""
    settings = _settings(make_settings)
    user, conversation = new_id("u"), new_id("c")
    fake_model.script("Hello Ann, nice to meet you.", "You said your name is Ann.")
    async with bot(settings) as (service, _), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        first = await client.chat.completions.create(
            model="llm-bot",
            messages=[{"role": "system", "content": "be nice"}, *_history("my name is Ann")],
            user=user,
            metadata={"conversation_id": conversation},
        )
        assert first.choices[0].message.content == "Hello Ann, nice to meet you."
        assert first.choices[0].finish_reason == "stop"
        assert first.object == "chat.completion"
        assert first.model == "llm-bot"
        assert first.usage is not None
        assert first.usage.prompt_tokens > 0
        second = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("my name is Ann", "Hello Ann, nice to meet you.", "what is my name?"),
            user=user,
            extra_headers={"X-Conversation-Id": conversation},
        )
        assert second.choices[0].message.content == "You said your name is Ann."
        await client.close()
        memory = await service.store.load(ConversationKey("tenant_a", user, conversation), "probe")
    prompt = [(m["role"], m["content"]) for m in fake_model.chat_requests()[-1].messages()]
    assert prompt.count(("user", "my name is Ann")) == 1
    assert prompt.count(("assistant", "Hello Ann, nice to meet you.")) == 1
    assert ("system", "be nice") not in prompt  # the client's history is not ingested
    assert [m.content for m in memory.memory.messages] == [
        "my name is Ann",
        "Hello Ann, nice to meet you.",
        "what is my name?",
        "You said your name is Ann.",
    ]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_streaming_reply_arrives_in_pieces_with_usage_and_done(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, api: str
) -> None:
    """The service streams the model's reply on either API (``stream=True``), each model
    chunk as it comes (``LLM_BOT_STREAM_INTERVAL_MS=0``)."""
    settings = _settings(make_settings, api=api, stream_interval_ms=0)
    text = "Streaming works: one piece at a time, then the end. สวัสดีครับ"
    fake_model.script(text)
    fake_model.set_stream_rate(200)
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("stream please"),
            user=new_id("u"),
            metadata={"conversation_id": new_id("c")},
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == text
    assert len(pieces) >= 5  # streamed, not one block
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    model_requests = fake_model.chat_requests() + fake_model.responses_requests()
    assert [r.body.get("stream") for r in model_requests] == [True]


async def test_errors_are_openai_style(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Bad key (401), a request the gateway refuses (400 naming the parameter), and an event
    the service fails (the model refuses: 502 with the service's error code, a request id and
    none of the service's own text, which the log line of that request id holds)."""
    settings = _settings(make_settings, max_attempts=1)
    conversation = {"conversation_id": new_id("c")}
    async with bot(settings), running_gateway(settings) as gateway:
        wrong = sdk_client(gateway, api_key="sk-wrong")
        with pytest.raises(openai.AuthenticationError) as denied:
            await wrong.chat.completions.create(
                model="llm-bot", messages=_history("hi"), user="u1", metadata=conversation
            )
        assert denied.value.code == "invalid_api_key"
        await wrong.close()
        client = sdk_client(gateway)
        with pytest.raises(openai.BadRequestError) as no_user:
            await client.chat.completions.create(
                model="llm-bot", messages=_history("hi"), metadata=conversation
            )
        assert "user" in no_user.value.message
        with pytest.raises(openai.BadRequestError) as not_user_last:
            await client.chat.completions.create(
                model="llm-bot", messages=_history("hi", "hello"), user="u1", metadata=conversation
            )
        assert "last message" in not_user_last.value.message
        with pytest.raises(openai.BadRequestError) as with_tools:
            await client.chat.completions.create(
                model="llm-bot",
                messages=_history("hi"),
                user="u1",
                metadata=conversation,
                tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            )
        assert with_tools.value.code == "unsupported_parameter"
        fake_model.script(Fault.status(400, "bad prompt"), Fault.status(400, "bad prompt"))
        with capture_logs() as logs, pytest.raises(openai.APIStatusError) as failed:
            await client.chat.completions.create(
                model="llm-bot", messages=_history("hi"), user="u1", metadata=conversation
            )
        assert failed.value.status_code == 502
        assert failed.value.code == "model_error"
        _assert_hidden_and_logged(failed.value, logs, "HTTP 400")
        with pytest.raises(openai.APIStatusError) as failed_stream:
            await client.chat.completions.create(
                model="llm-bot",
                messages=_history("hi"),
                user="u1",
                metadata=conversation,
                stream=True,
            )
        assert failed_stream.value.status_code == 502  # nothing streamed: a real status
        await client.close()


def _assert_hidden_and_logged(
    error: openai.APIStatusError, logs: Sequence[Mapping[str, Any]], internal: str
) -> None:
    """The client's error has a code and a request id but not the internal text, which the
    log line naming that request id holds."""
    body = error.body
    assert isinstance(body, dict)
    assert body["code"]
    request_id = body["request_id"]
    assert error.request_id == request_id  # the X-Request-Id header
    assert internal not in json.dumps(body)
    [line] = [entry for entry in logs if entry.get("request_id") == request_id]
    assert line["event"] == "gateway.request_failed"
    assert internal in line["detail"]


async def test_concurrent_users_each_get_their_own_stream(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = _settings(make_settings)
    fake_model.set_stream_rate(500)

    async def ask(client: openai.AsyncOpenAI, n: int) -> str:
        return await _streamed_text(
            client, f"question number {n} from user {n}", user=f"user{n}", conversation=f"conv{n}"
        )

    async with bot(settings), running_gateway(settings) as gateway:
        clients = [sdk_client(gateway, tenant) for tenant in ("tenant_a", "tenant_b")]
        texts = await asyncio.gather(*(ask(clients[n % 2], n) for n in range(12)))
        for client in clients:
            await client.close()
    assert texts == [f"echo: question number {n} from user {n}" for n in range(12)]


async def test_by_default_pieces_after_the_first_are_gathered_per_interval(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The first model chunk goes out at once; later ones go in fewer, larger pieces
    (``LLM_BOT_STREAM_INTERVAL_MS``, 40), and nothing is lost."""
    settings = _settings(make_settings)
    text = " ".join(f"word{n}" for n in range(40))
    fake_model.script(text)
    fake_model.set_stream_rate(200)  # a chunk every 5 ms
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        seen: list[str] = []
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("talk to me"),
            user=new_id("u"),
            metadata={"conversation_id": new_id("c")},
            stream=True,
        )
        await _read_into(stream, seen)
        await client.close()
    assert "".join(seen) == text
    assert seen[0] == "word0"  # the model's first chunk, at once
    assert 2 <= len(seen) <= 20  # far fewer than the model's ~80 chunks


async def test_a_stream_cut_midway_and_retried_never_shows_two_texts(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The model's stream breaks after 3 pieces; the retried call streams again. Same text:
    the client gets it once, seamlessly. A different text: the stream ends with an error
    (never a second text), and the reply that counts is the one remembered, which the same
    Idempotency-Key then returns without a model call."""
    settings = _settings(make_settings, stream_interval_ms=0)  # each piece as it comes
    steady = "one two three four five six"
    fake_model.script(Fault.cut(3, steady), steady)
    async with bot(settings) as (service, _), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        user, conversation = new_id("u"), new_id("c")
        assert await _streamed_text(client, "count", user=user, conversation=conversation) == steady

        fake_model.script(Fault.cut(3, "alpha beta gamma delta"), "A different answer.")
        key = new_id("idem")
        seen: list[str] = []
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("count", steady, "again"),
            user=user,
            metadata={"conversation_id": conversation},
            stream=True,
            extra_headers={"Idempotency-Key": key},
        )
        with pytest.raises(openai.APIError) as broken:
            await _read_into(stream, seen)
        assert "".join(seen) == "alpha beta gamma"  # what the first call had streamed
        assert "Idempotency-Key" in broken.value.message
        calls = len(fake_model.chat_requests())
        again = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("count", steady, "again"),
            user=user,
            metadata={"conversation_id": conversation},
            extra_headers={"Idempotency-Key": key},
        )
        assert again.choices[0].message.content == "A different answer."
        assert len(fake_model.chat_requests()) == calls  # the stored reply, no model call
        await client.close()
        memory = await service.store.load(ConversationKey("tenant_a", user, conversation), "p")
    assert [m.content for m in memory.memory.messages][-2:] == ["again", "A different answer."]


async def test_client_disconnect_midstream_loses_nothing(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = _settings(make_settings)
    text = " ".join(f"word{n}" for n in range(40))
    fake_model.script(text)
    fake_model.set_stream_rate(100)  # ~0.4 s of streaming
    user, conversation = new_id("u"), new_id("c")
    async with bot(settings) as (service, integrator), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("tell me a long story"),
            user=user,
            metadata={"conversation_id": conversation},
            stream=True,
        )
        received = 0
        async for _ in stream:
            received += 1
            if received == 3:
                break
        await stream.close()
        await client.close()
        candidate = await integrator.next_candidate()
        assert candidate.body["text"] == text  # the turn completed after the client left
        async with asyncio.timeout(10):
            while gateway.bus.waiting:
                await asyncio.sleep(0.05)
        memory = await service.store.load(ConversationKey("tenant_a", user, conversation), "p")
    assert [m.content for m in memory.memory.messages] == ["tell me a long story", text]
    metrics = gateway.metrics.registry
    assert (
        metrics.get_sample_value("llmbot_gateway_stream_endings_total", {"ending": "disconnected"})
        == 1.0
    )


async def test_answers_with_no_egress_subscriber_and_from_two_gateway_replicas(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A deployment whose clients all come through gateways may have no queue bound to the
    candidate routing key: the candidate's egress copy is then not mandatory (the requester
    named itself in reply_to). Two gateway replicas, each with its own reply address."""
    settings = _settings(make_settings)
    async with (
        running_service(settings),
        running_gateway(settings) as first,
        running_gateway(settings) as second,
    ):
        clients = [sdk_client(first), sdk_client(second)]
        replies = await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="llm-bot",
                    messages=_history(f"to gateway {n}"),
                    user=f"user{n}",
                    metadata={"conversation_id": "c"},
                )
                for n, client in enumerate(clients * 3)
            )
        )
        for client in clients:
            await client.close()
    assert [r.choices[0].message.content for r in replies] == [
        f"echo: to gateway {n}" for n in range(6)
    ]


async def test_same_idempotency_key_in_two_tenants_at_once_stays_apart(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = _settings(make_settings)
    fake_model.set_stream_rate(300)
    key = new_id("shared")

    async def ask(tenant: str) -> str:
        client = sdk_client(gateway, tenant)
        text = await _streamed_text(
            client,
            f"I am {tenant}",
            user="same-user",
            conversation="same-conversation",
            extra_headers={"Idempotency-Key": key},
        )
        await client.close()
        return text

    async with bot(settings), running_gateway(settings) as gateway:
        texts = await asyncio.gather(ask("tenant_a"), ask("tenant_b"))
    assert list(texts) == ["echo: I am tenant_a", "echo: I am tenant_b"]


async def test_raw_sse_with_curl(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = _settings(make_settings)
    fake_model.script("Raw events.")
    body = {
        "model": "llm-bot",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "user": new_id("u"),
        "metadata": {"conversation_id": new_id("c")},
    }
    async with bot(settings), running_gateway(settings) as gateway:
        curl = await asyncio.create_subprocess_exec(
            "curl", "-sS", "-N", f"{gateway.base_url}/chat/completions",
            "-H", f"Authorization: Bearer {TENANT_KEYS['tenant_a']}",
            "-H", "Content-Type: application/json",
            "-d", json.dumps(body),
            "-D", "-",
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(curl.communicate(), 20)
    head, _, events = out.decode().partition("\r\n\r\n")
    assert "content-type: text/event-stream" in head.lower()
    lines = [line for line in events.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Raw events."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_models_health_metrics_and_the_trace_parent(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """/healthz, /readyz and /metrics answer on the internal port (LLM_BOT_HTTP_PORT) and
    are not found on the public one; the request's span is the event trace's parent."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = _settings(make_settings)
    registry = CollectorRegistry()
    async with (
        bot(settings, tracer_provider=provider),
        running_gateway(settings, tracer_provider=provider, registry=registry) as gateway,
    ):
        client = sdk_client(gateway)
        models = await client.models.list()
        assert [m.id for m in models.data] == ["llm-bot"]
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=_history("trace me"),
            user=new_id("u"),
            metadata={"conversation_id": new_id("c")},
            stream=True,
        )
        async for _ in stream:
            pass
        await client.close()
        public = gateway.base_url.removesuffix("/v1")
        internal = f"http://127.0.0.1:{gateway.internal_port}"
        assert gateway.internal_port != gateway.port
        async with aiohttp.ClientSession() as http:
            for path in ("/healthz", "/readyz", "/metrics"):
                async with http.get(public + path) as response:
                    assert response.status == 404, path
                async with http.get(internal + path) as response:
                    assert response.status == 200, path
            async with http.get(public + "/v1/models") as response:
                assert response.status == 401
            async with http.get(internal + "/metrics") as response:
                exposition = await response.text()
    assert 'llmbot_gateway_requests_total{status="200",stream="true"} 1.0' in exposition
    assert "llmbot_gateway_time_to_first_token_seconds_count 1.0" in exposition
    spans = exporter.get_finished_spans()
    [server] = [s for s in spans if s.name == "POST /v1/chat/completions"]
    [consumer] = [s for s in spans if s.name.startswith("process ")]
    assert consumer.context.trace_id == server.context.trace_id
    assert consumer.parent is not None
    assert consumer.parent.span_id == server.context.span_id


async def test_gateway_recovers_after_its_broker_connection_drops(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """The connection under the gateway breaks (as in a broker restart or a network blip):
    the request waiting at that moment fails at once with 503 (its reply address died with
    the old channel), and once reconnected the gateway answers again."""
    settings = _settings(make_settings)
    fake_model.set_latency(0.5)
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)

        async def ask() -> ChatCompletion:
            return await client.chat.completions.create(
                model="llm-bot",
                messages=_history("hello"),
                user="u1",
                metadata={"conversation_id": "c1"},
            )

        waiting = asyncio.create_task(ask())
        await asyncio.sleep(0.2)
        connection = gateway.bus._connection  # the test breaks it on purpose
        assert connection is not None
        underlying = connection.transport
        assert underlying is not None
        await underlying.connection.close(ConnectionError("injected: connection lost"))
        with capture_logs() as logs, pytest.raises(openai.APIStatusError) as lost:
            await waiting
        assert lost.value.status_code == 503
        _assert_hidden_and_logged(lost.value, logs, "broker connection was lost")
        async with asyncio.timeout(20):
            while gateway.bus.readiness() is not None:
                await asyncio.sleep(0.1)
        fake_model.set_latency(0)
        again = await ask()
        assert again.choices[0].message.content == "echo: hello"
        await client.close()
