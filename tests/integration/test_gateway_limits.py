"""Per-key and per-user limits at the real gateway in front of the real service: a user
past its in-flight cap and a key past its requests per minute get 429
``rate_limit_exceeded`` with ``Retry-After``, others are served meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import openai
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import new_id
from tests.support.gateway import gateway_settings, running_gateway, sdk_client
from tests.support.harness import bot

pytestmark = pytest.mark.integration


async def _ask(client: openai.AsyncOpenAI, user: str) -> str:
    reply = await client.chat.completions.create(
        model="llm-bot",
        messages=[{"role": "user", "content": "hello"}],
        user=user,
        metadata={"conversation_id": new_id("c")},
    )
    return reply.choices[0].message.content or ""


async def test_a_user_past_its_in_flight_cap_is_429_and_another_user_is_served(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    fake_model.set_latency(1.0)
    settings = gateway_settings(make_settings, gateway_user_max_in_flight=1)
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        first = asyncio.create_task(_ask(client, "ann"))
        await fake_model.requests_started(1)  # the first is in flight, waiting for the model
        with pytest.raises(openai.RateLimitError) as refused:
            await _ask(client, "ann")
        other = await _ask(client, "bob")
        assert await first
        after = await _ask(client, "ann")  # the first ended: ann may ask again
        await client.close()
    assert refused.value.code == "rate_limit_exceeded"
    assert refused.value.response.headers["Retry-After"] == "1"
    assert other
    assert after


async def test_a_key_past_its_requests_per_minute_is_429_with_when_to_retry(
    make_settings: Callable[..., Settings],
) -> None:
    settings = gateway_settings(make_settings, gateway_key_requests_per_minute=12)  # 2 at once
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        await _ask(client, "u1")
        await _ask(client, "u2")
        with pytest.raises(openai.RateLimitError) as refused:
            await _ask(client, "u3")
        other_tenant = sdk_client(gateway, "tenant_b")
        assert await _ask(other_tenant, "u3")
        await client.close()
        await other_tenant.close()
    assert 1 <= int(refused.value.response.headers["Retry-After"]) <= 60
