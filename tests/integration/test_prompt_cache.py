"""Provider prompt caching through the broker: ``prompt_cache_key`` per tenant + user
(a digest) where the provider takes it, ``cached_tokens`` read into CandidateV1 usage, the
token metric and the span, and ``gen_ai.provider.name`` from configuration."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, bot

pytestmark = pytest.mark.integration

LONG_SYSTEM_PROMPT = "You are the assistant of a home-goods store. " * 120
"""~5,300 characters: over the 1,024 tokens a provider caches at the least."""


async def say(client: Integrator, tenant: str, user: str, conversation: str, text: str) -> dict:  # type: ignore[type-arg]
    await client.publish(
        message_event(tenant=tenant, user=user, conversation=conversation, text=text)
    )
    return (await client.next_candidate()).body


async def test_a_users_second_turn_is_served_from_the_cache_and_reported(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = make_settings(
        system_prompt=LONG_SYSTEM_PROMPT,
        prompt_cache_key="on",
        provider_name="vllm",
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    user, other = new_id("u"), new_id("u")
    conversation = new_id("c")
    async with bot(settings, tracer_provider=provider) as (service, client):
        first = await say(client, "tcache", user, conversation, "hello")
        second = await say(client, "tcache", user, conversation, "and again")
        await say(client, "tcache", other, new_id("c"), "hello")
        registry = service.base.metrics.registry
    assert first["usage"]["cached_input_tokens"] == 0
    cached = second["usage"]["cached_input_tokens"]
    assert cached >= 1024
    assert cached <= second["usage"]["input_tokens"]
    assert registry.get_sample_value(
        "llmbot_model_tokens_total", {"type": "cached_input"}
    ) == float(cached)
    keys = [r.body.get("prompt_cache_key") for r in fake_model.chat_requests()]
    assert keys[0] == keys[1]
    assert keys[2] != keys[0]
    assert all(isinstance(k, str) and k.startswith("llmbot-") for k in keys)
    assert all(user not in str(k) and "tcache" not in str(k) for k in keys)
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat fake-model"]
    assert [s.attributes["gen_ai.provider.name"] for s in chats] == ["vllm"] * 3  # type: ignore[index]
    assert chats[1].attributes["gen_ai.usage.cache_read.input_tokens"] == cached  # type: ignore[index]


async def test_no_cache_key_for_a_provider_not_known_to_take_it(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """``auto`` (the default) sends the key to OpenAI only: the fake model's local URL is
    not OpenAI, so no request carries it, and the provider is named by its host."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with bot(make_settings(), tracer_provider=provider) as (_, client):
        await say(client, "tcache", new_id("u"), new_id("c"), "hello")
    assert "prompt_cache_key" not in fake_model.chat_requests()[0].body
    (chat,) = [s for s in exporter.get_finished_spans() if s.name == "chat fake-model"]
    assert chat.attributes["gen_ai.provider.name"] == "127.0.0.1"  # type: ignore[index]
