"""The model adapter behaves the same on both HTTP transports under the openai SDK
(``LLM_BOT_MODEL_HTTP_CLIENT``): replies, timeouts and unreachable endpoints."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Literal

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters.openai_model import OpenAIChatModel
from llm_bot.bootstrap import model_client
from llm_bot.config import Settings
from llm_bot.errors import ModelTimeout, ModelUnavailable
from llm_bot.fake_model import FakeModelServer, Fault
from llm_bot.telemetry.metrics import Metrics

Transport = Literal["aiohttp", "httpx"]
pytestmark = pytest.mark.parametrize("transport", ["aiohttp", "httpx"])


@pytest.fixture
def make_model(
    make_settings: Callable[..., Settings],
) -> Callable[..., AsyncIterator[OpenAIChatModel]]:
    async def factory(**overrides: object) -> AsyncIterator[OpenAIChatModel]:
        settings = make_settings(**overrides)
        client = model_client(settings.model)
        try:
            yield OpenAIChatModel(
                client=client,
                model=settings.openai_model,
                tracer=TracerProvider().get_tracer("test"),
                metrics=Metrics(registry=CollectorRegistry()),
            )
        finally:
            await client.close()

    return factory


async def test_reply_is_parsed(
    transport: Transport, make_model: Callable[..., AsyncIterator[OpenAIChatModel]]
) -> None:
    async for model in make_model(model_http_client=transport):
        reply = await model.complete([{"role": "user", "content": "hello"}])
    assert (reply.text, reply.input_tokens > 0, reply.output_tokens > 0) == (
        "echo: hello",
        True,
        True,
    )


async def test_hanging_model_is_a_timeout(
    transport: Transport,
    make_model: Callable[..., AsyncIterator[OpenAIChatModel]],
    fake_model: FakeModelServer,
) -> None:
    fake_model.script(Fault.hang(30))
    async for model in make_model(model_http_client=transport, openai_timeout_ms=300):
        with pytest.raises(ModelTimeout):
            await model.complete([{"role": "user", "content": "hello"}])


async def test_refused_connection_is_unavailable_not_a_timeout(
    transport: Transport, make_model: Callable[..., AsyncIterator[OpenAIChatModel]]
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    async for model in make_model(model_http_client=transport, openai_base_url=base_url):
        with pytest.raises(ModelUnavailable, match="unreachable"):
            await model.complete([{"role": "user", "content": "hello"}])


async def test_a_stream_that_breaks_off_is_unavailable(
    transport: Transport,
    make_model: Callable[..., AsyncIterator[OpenAIChatModel]],
    fake_model: FakeModelServer,
) -> None:
    """The connection drops after two pieces of a streamed reply: a retryable
    ``ModelUnavailable`` on either transport, never an unexpected exception."""
    fake_model.script(Fault.cut(2, "one two three four five six"))
    pieces: list[str] = []

    async def on_delta(text: str) -> None:
        pieces.append(text)

    async for model in make_model(model_http_client=transport):
        with pytest.raises(ModelUnavailable):
            await model.complete([{"role": "user", "content": "hello"}], on_delta=on_delta)
