"""A full ingress queue (its policy's bound, ``overflow: reject-publish``): the gateway
answers 503 ``overloaded`` with ``Retry-After`` at once, publishes nothing more, and keeps
serving once there is room again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from llm_bot.config import Settings
from tests.support.broker_policy import queue_policy
from tests.support.events import new_id
from tests.support.gateway import TENANT_KEYS, gateway_settings, running_gateway
from tests.support.harness import integrator

pytestmark = pytest.mark.integration


async def _ask(url: str, text: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    body = {"model": "llm-bot", "user": "u1", "messages": [{"role": "user", "content": text}]}
    headers = {
        "Authorization": f"Bearer {TENANT_KEYS['tenant_a']}",
        "X-Conversation-Id": new_id("c"),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/chat/completions", data=json.dumps(body), headers=headers) as response,
    ):
        return response.status, dict(response.headers), await response.json()


async def test_a_full_ingress_queue_is_503_overloaded_and_nothing_more_is_published(
    make_settings: Callable[..., Settings],
) -> None:
    """Nobody consumes: requests fill the queue to its bound (a quorum queue refuses once
    it is over it: one more gets in), then the next one is refused at once."""
    settings = gateway_settings(make_settings, gateway_timeout_seconds=5)
    bound = 2
    async with integrator(settings) as client, running_gateway(settings) as gateway:
        with queue_policy(
            settings.ingress_queue, {"max-length": bound, "overflow": "reject-publish"}
        ):
            waiting: list[asyncio.Task[tuple[int, dict[str, str], dict[str, Any]]]] = []
            refused = None
            while refused is None and len(waiting) <= bound + 1:
                request = asyncio.create_task(_ask(gateway.base_url, f"q{len(waiting)}"))
                done, _ = await asyncio.wait([request], timeout=1.0)
                if done:
                    refused = request.result()
                else:
                    waiting.append(request)
            depth = await client.ingress_depth()
            timed_out = {result[0] for result in await asyncio.gather(*waiting)}
    assert refused is not None, f"{len(waiting)} requests were all taken"
    status, headers, body = refused
    assert status == 503
    assert body["error"]["code"] == "overloaded"
    assert headers["Retry-After"] == "5"
    assert "queue" not in body["error"]["message"]  # the broker's side stays in the log
    assert bound <= len(waiting) == depth <= bound + 1
    assert timed_out == {504}
