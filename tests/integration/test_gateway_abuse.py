"""What outside probes found at the gateway's door (issue 44): a key's limit counts the key,
however ``Authorization`` spells it, on every authenticated path."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import aiohttp
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import new_id
from tests.support.gateway import TENANT_KEYS, gateway_settings, running_gateway
from tests.support.harness import bot

pytestmark = pytest.mark.integration

KEY = TENANT_KEYS["tenant_a"]
SPELLINGS = ("Bearer", "bearer", "BEARER", "bEaReR")


async def _call(session: aiohttp.ClientSession, url: str, scheme: str, n: int) -> int:
    """A chat completion (odd ``n``, as a user never seen before) or ``GET /v1/models``."""
    headers = {"Authorization": f"{scheme} {KEY}"}
    if n % 2:
        body = {
            "model": "llm-bot",
            "messages": [{"role": "user", "content": "hello"}],
            "user": f"user{n}",
            "metadata": {"conversation_id": new_id("c")},
        }
        async with session.post(f"{url}/chat/completions", json=body, headers=headers) as reply:
            return reply.status
    async with session.get(f"{url}/models", headers=headers) as reply:
        return reply.status


async def test_a_keys_thirteenth_request_in_the_minute_is_429_however_the_header_is_spelled(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """12 requests a minute (two at once): the first two are served, and every other
    request of the minute is 429, whatever the scheme's case, the path (``/v1/models``
    counts) or the user named; a header with two spaces is a 401, not another key."""
    settings = gateway_settings(make_settings, gateway_key_requests_per_minute=12)
    async with bot(settings), running_gateway(settings) as gateway, aiohttp.ClientSession() as s:
        url = gateway.base_url
        served = [await _call(s, url, "Bearer", 1), await _call(s, url, "bearer", 2)]
        spellings = itertools.cycle(SPELLINGS)
        rest = await asyncio.gather(*(_call(s, url, next(spellings), n) for n in range(3, 14)))
        async with s.get(f"{url}/models", headers={"Authorization": f"Bearer  {KEY}"}) as reply:
            two_spaces = reply.status, (await reply.json())["error"]["message"]
    assert served == [200, 200]
    assert rest == [429] * 11
    assert two_spaces[0] == 401
    assert "malformed Authorization header" in two_spaces[1]
