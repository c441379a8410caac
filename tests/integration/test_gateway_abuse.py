"""What outside probes found at the gateway's door (issue 44): a key's limit counts the key,
however ``Authorization`` spells it, on every authenticated path; failed keys are
throttled per client address and key prefix without locking out anyone else."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable

import aiohttp
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.events import new_id
from tests.support.gateway import TENANT_KEYS, gateway_settings, running_gateway
from tests.support.harness import bot
from tests.support.logs import rendered_logs

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


async def _post_from(address: str, url: str, key: str, count: int) -> list[tuple[int, str]]:
    """``count`` chat completions with ``key``, ten at a time, from the local ``address``
    (a loopback alias: Linux routes all of 127.0.0.0/8 to lo)."""
    connector = aiohttp.TCPConnector(local_addr=(address, 0), limit=10)
    body = {"model": "llm-bot", "messages": [{"role": "user", "content": "hi"}], "user": "u1"}

    async def one(n: int) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {key}{n:04d}" if count > 1 else f"Bearer {key}"}
        async with session.post(f"{url}/chat/completions", json=body, headers=headers) as reply:
            return reply.status, reply.headers.get("Retry-After", "")

    async with aiohttp.ClientSession(connector=connector) as session:
        return list(await asyncio.gather(*(one(n) for n in range(count))))


async def test_fifty_wrong_keys_from_one_address_end_in_429s_and_another_address_is_served(
    make_settings: Callable[..., Settings],
) -> None:
    """The guesses share the real key's prefix, so the prefix is locked too: a right key
    is still served at once from another address, and refused from the guessing one."""
    settings = gateway_settings(make_settings)  # defaults: 10 failures a minute, 30 s
    guess = KEY[:-4]  # + four digits: wrong keys that look like the real one
    with rendered_logs() as logs:
        async with running_gateway(settings) as gateway:
            url = gateway.base_url
            started = asyncio.get_running_loop().time()
            guessed = await _post_from("127.0.0.2", url, guess, 50)
            guessing_took = asyncio.get_running_loop().time() - started
            async with aiohttp.ClientSession() as session:
                asked = asyncio.get_running_loop().time()
                async with session.get(
                    f"{url}/models", headers={"Authorization": f"Bearer {KEY}"}
                ) as ok:
                    served = ok.status, asyncio.get_running_loop().time() - asked
                metrics_url = f"http://127.0.0.1:{gateway.internal_port}/metrics"
                async with session.get(metrics_url) as scraped:
                    metrics = await scraped.text()
            [refused_right_key] = await _post_from("127.0.0.2", url, KEY, 1)
    statuses = [status for status, _ in guessed]
    assert guessing_took < 10
    assert statuses.count(401) == 10
    assert statuses.count(429) == 40
    assert all(1 <= int(after) <= 30 for status, after in guessed if status == 429)
    assert served[0] == 200
    assert served[1] < 1.0  # at once: not held like a refusal
    assert refused_right_key[0] == 429
    assert 'llmbot_auth_lockouts_total{scope="address",surface="gateway"} 1.0' in metrics
    assert 'llmbot_auth_lockouts_total{scope="key_prefix",surface="gateway"} 1.0' in metrics
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    locked = [line for line in lines if line["event"] == "auth.locked_out"]
    assert {line["scope"] for line in locked} == {"address", "key_prefix"}
    assert guess not in logs.getvalue()


async def test_a_flood_of_silent_connections_from_one_address_leaves_room_for_another(
    make_settings: Callable[..., Settings],
) -> None:
    """50 connections from one address that send nothing, against 20 slots: past its 5 the
    address's connections are closed at once, so another address's request is answered
    (200) within a second, while the silent ones are still open."""
    settings = gateway_settings(
        make_settings, gateway_max_connections=20, gateway_max_connections_per_address=5
    )
    async with running_gateway(settings) as gateway:
        flood = [
            await asyncio.open_connection("127.0.0.1", gateway.port, local_addr=("127.0.0.2", 0))
            for _ in range(50)
        ]
        await asyncio.sleep(0.2)  # the gateway has seen and settled every connection
        closed = 0
        for reader, _ in flood:
            with contextlib.suppress(TimeoutError):
                closed += await asyncio.wait_for(reader.read(), 0.05) == b""
        async with aiohttp.ClientSession() as session:
            asked = asyncio.get_running_loop().time()
            headers = {"Authorization": f"Bearer {KEY}"}
            async with session.get(f"{gateway.base_url}/models", headers=headers) as reply:
                served = reply.status, asyncio.get_running_loop().time() - asked
            metrics_url = f"http://127.0.0.1:{gateway.internal_port}/metrics"
            async with session.get(metrics_url) as scraped:
                metrics = await scraped.text()
        for _, writer in flood:
            writer.close()
    assert served[0] == 200
    assert served[1] < 1.0
    assert closed == 45
    assert 'llmbot_gateway_connections_refused_total{reason="per_address"} 45.0' in metrics
