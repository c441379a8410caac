"""A provider's rate limit is a pause, not a failure (SPEC 4 "Provider rate limits"):
through the service, against the fake model answering 429 with Retry-After."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import message_event, new_id
from tests.support.harness import bot
from tests.support.settled import settled

pytestmark = pytest.mark.integration


async def test_a_rate_limit_storm_pauses_the_process_and_every_event_is_answered(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Every model call answered 429 (Retry-After 0.5 s) for 1.5 s while 16 events are in
    flight, with LLM_BOT_MAX_ATTEMPTS=1: nothing dead-lettered (a 429 is no attempt), every
    event answered soon after the limit lifts, and the provider asked only about once per
    pause beyond the first wave."""
    registry = CollectorRegistry()
    settings = make_settings(prefetch=16, max_attempts=1)
    async with bot(settings, registry=registry) as (service, client):
        fake_model.rate_limit(1.5, retry_after=0.5)
        lifted = time.monotonic() + 1.5
        for _ in range(16):
            await client.publish(
                message_event(tenant="trl", user=new_id("u"), conversation=new_id("c"), text="hi")
            )
        answered = [await client.next_candidate(within=15) for _ in range(16)]
        done = time.monotonic()
        assert await settled(service.metrics, 16) == 16  # all acked: no error on its way
        assert client.errors.empty()
    assert {c.body["text"] for c in answered} == {"echo: hi"}
    assert done - lifted < 2.0
    assert fake_model.rate_limited <= 16 + 5, f"{fake_model.rate_limited} refused calls"
    refused = registry.get_sample_value("llmbot_model_rate_limited_total", {"source": "chat"})
    assert refused == fake_model.rate_limited
    paused = registry.get_sample_value("llmbot_model_paused_seconds_total")
    assert paused is not None
    assert paused >= 1.0
    dead = registry.get_sample_value("llmbot_events_total", {"outcome": "dead_lettered"})
    assert dead == 0


async def test_a_limit_longer_than_the_wait_budget_is_a_model_error(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """Rate-limited past LLM_BOT_RATE_LIMIT_MAX_WAIT_SECONDS: ErrorV1 model_error and a
    dead letter (replayable), as a provider outage would end."""
    settings = make_settings(rate_limit_max_wait_seconds=0.6)
    async with bot(settings) as (_, client):
        fake_model.rate_limit(30, retry_after=0.2)
        await client.publish(
            message_event(tenant="trl", user=new_id("u"), conversation=new_id("c"), text="hi")
        )
        error = await client.next_error(within=10)
        await client.dead_letters(1)
    assert error.body["code"] == "model_error"
    assert "rate-limited" in error.body["message"]
