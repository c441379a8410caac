"""The memory inspector in headless Chromium (Debian's ``chromium``, driven by Playwright):
log in, find the seeded user, see the planted fact, run "why" and see it recalled with its
scores, forget a conversation (gone on the page and in Redis); a new turn appears on the
conversation's page without a reload; no XSS payload executes."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
import uvicorn
from playwright.async_api import Page, async_playwright

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.app import create_app
from tests.integration.test_memory_worker import say
from tests.support.harness import bot
from tests.support.inspector import PLANTED, inspector_for, inspector_settings, seed_user
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KEY = "browser-test-key"
LIVE = "Is the museum open on Mondays?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield await browser.new_page()
        finally:
            await browser.close()


async def test_find_a_user_see_why_and_forget_a_conversation(
    service_urls: ServiceUrls, page: Page
) -> None:
    """The whole path an operator takes, in a real browser, with XSS payloads in memory."""
    async with inspector_settings(service_urls, f"*={key_digest(KEY)}") as settings:
        user = await seed_user(settings)
        async with inspector_for(settings) as inspector:
            port = free_port()
            server = uvicorn.Server(
                uvicorn.Config(create_app(inspector), port=port, log_config=None, lifespan="off")
            )
            serving = asyncio.create_task(server.serve())
            try:
                while not server.started:
                    await asyncio.sleep(0.05)
                base = f"http://127.0.0.1:{port}"
                await page.goto(f"{base}/login")
                await page.fill("#key", KEY)
                await page.click("#login")
                await page.fill("#tenant", user.tenant_id)
                await page.press("#tenant", "Enter")
                await page.click(f"a.user:text-is('{user.user_id}')")
                assert PLANTED in await page.inner_text("#facts")
                # the conversation with the XSS payloads: shown as text, nothing runs
                await page.click(f"a.conversation:text-is('{user.second.conversation_id}')")
                assert "<script>window.pwned=1</script>" in await page.inner_text("#window")
                # live: a turn published through the broker appears without a reload
                await page.evaluate("() => { window.notReloaded = true; }")
                async with bot(settings) as (_service, client):
                    await say(client, user.second, LIVE)
                await page.wait_for_selector(f"#window >> text={LIVE}", timeout=15_000)
                assert await page.evaluate("() => window.notReloaded === true")
                await page.click("#why")
                await page.fill("#message", "Where do I live now, Chiang Mai?")
                await page.click("#dry-run")
                recalled = await page.inner_text("#recalled")
                assert "Chiang Mai" in recalled
                assert await page.locator("#sections tr").count() == 5
                assert await page.evaluate("() => window.pwned === undefined")
                # forget the first conversation
                first = user.first.conversation_id
                await page.goto(f"{base}/t/{user.tenant_id}/u/{user.user_id}/c/{first}/forget")
                assert "raw trace" in await page.inner_text("#goes")
                await page.click("#confirm")
                await page.wait_for_selector("#done")
                await page.goto(f"{base}/t/{user.tenant_id}/u/{user.user_id}")
                assert first not in await page.inner_text("#conversations")
                keys = RedisKeys(prefix=settings.redis_key_prefix)
                assert not await inspector.base.redis.exists(keys.raw_trace(user.first))
                assert await page.evaluate("() => window.pwned === undefined")
            finally:
                server.should_exit = True
                await serving


async def test_the_login_link_of_make_dev_logs_in_and_leaves_no_key_in_the_address(
    service_urls: ServiceUrls, page: Page
) -> None:
    """``/login#key=K`` (what ``llm-bot dev`` prints): the page's script logs in with K; the
    key is gone from the address bar. A wrong key stays on the login page."""
    async with (
        inspector_settings(service_urls, f"*={key_digest(KEY)}") as settings,
        inspector_for(settings) as inspector,
    ):
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(inspector), port=port, log_config=None, lifespan="off")
        )
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                await asyncio.sleep(0.05)
            base = f"http://127.0.0.1:{port}"
            await page.goto(f"{base}/login#key=not-the-key")
            await page.wait_for_selector("p.error")
            assert "not-the-key" not in page.url
            await page.goto(f"{base}/login#key={KEY}")
            await page.wait_for_url(f"{base}/")
            assert KEY not in page.url
            assert await page.query_selector("#tenant") is not None  # the home page's search
        finally:
            server.should_exit = True
            await serving
