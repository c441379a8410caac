"""The inspector's login is throttled (issue 44, item 3): from one client address, 50 wrong
keys within 10 s end in 429s with ``Retry-After``, while another address logs in with the
right key at once."""

from __future__ import annotations

import asyncio

import pytest

from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.sessions import COOKIE
from tests.support.inspector import client_for, inspector_for, inspector_settings, login
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

KEY = "inspect-throttle-key-0123"


async def test_fifty_wrong_logins_from_one_address_end_in_429s_and_another_logs_in(
    service_urls: ServiceUrls,
) -> None:
    async with (
        inspector_settings(service_urls, f"*={key_digest(KEY)}") as settings,
        inspector_for(settings) as inspector,
    ):
        guesser = client_for(inspector, "203.0.113.7")
        user = client_for(inspector, "198.51.100.20")
        started = asyncio.get_running_loop().time()
        guesses = [await login(guesser, f"{KEY[:-4]}{n:04d}") for n in range(50)]
        took = asyncio.get_running_loop().time() - started
        right_from_guesser = await login(guesser, KEY)
        right_from_user = await login(user, KEY)
        exported = (await user.get("/metrics")).text
        await guesser.aclose()
        await user.aclose()
        lockouts = inspector.metrics.registry.get_sample_value(
            "llmbot_auth_lockouts_total", {"surface": "inspector", "scope": "address"}
        )
    statuses = [reply.status_code for reply in guesses]
    assert took < 10
    assert statuses == [401] * 10 + [429] * 40
    assert all(1 <= int(reply.headers["Retry-After"]) <= 30 for reply in guesses[10:])
    assert "Too many failed logins" in guesses[-1].text
    assert right_from_guesser.status_code == 429
    assert right_from_user.status_code == 303  # logged in: to the home page, with a cookie
    assert right_from_user.headers["set-cookie"].startswith(f"{COOKIE}=")
    assert lockouts == 1
    assert 'llmbot_auth_lockouts_total{scope="address",surface="inspector"} 1.0' in exported
    assert 'llmbot_auth_failures_total{surface="inspector"} 10.0' in exported
