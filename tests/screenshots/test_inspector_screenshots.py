"""``make screenshots``: the README's pictures of the memory inspector, made from the
browser test's seeding (a user seeded through the real broker and a worker pass) by
headless Chromium: the user page and a "why" dry run, into ``docs/images/``. Outside the
default test paths: it writes files in the repository."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import uvicorn
from playwright.async_api import ViewportSize, async_playwright

from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.app import create_app
from tests.integration.test_inspector_browser import ARGS, CHROMIUM, free_port
from tests.support.inspector import PLANTED, inspector_for, inspector_settings, seed_user
from tests.support.services import ServiceUrls

pytestmark = [pytest.mark.integration, pytest.mark.browser]

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
KEY = "screenshot-key"
VIEWPORT: ViewportSize = {"width": 1200, "height": 900}


async def test_screenshots_of_the_user_page_and_why(service_urls: ServiceUrls) -> None:
    """Both pictures are written, each showing what it is meant to show (the planted fact;
    the recalled items with their scores)."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    async with inspector_settings(service_urls, f"*={key_digest(KEY)}") as settings:
        user = await seed_user(settings)
        async with inspector_for(settings) as inspector, async_playwright() as driver:
            port = free_port()
            server = uvicorn.Server(
                uvicorn.Config(create_app(inspector), port=port, log_config=None, lifespan="off")
            )
            serving = asyncio.create_task(server.serve())
            browser = await driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                while not server.started:
                    await asyncio.sleep(0.05)
                base = f"http://127.0.0.1:{port}"
                page = await browser.new_page(viewport=VIEWPORT)
                await page.goto(f"{base}/login")
                await page.fill("#key", KEY)
                await page.click("#login")
                await page.goto(f"{base}/t/{user.tenant_id}/u/{user.user_id}")
                assert PLANTED in await page.inner_text("#facts")
                await page.screenshot(path=IMAGES / "inspector-user.png", full_page=True)
                why = (
                    f"{base}/t/{user.tenant_id}/u/{user.user_id}/c/{user.first.conversation_id}/why"
                )
                await page.goto(why)
                await page.fill("#message", "Where do I live now, Chiang Mai?")
                await page.click("#dry-run")
                assert "Chiang Mai" in await page.inner_text("#recalled")
                await page.locator("#recalled").scroll_into_view_if_needed()
                await page.screenshot(path=IMAGES / "inspector-why.png", full_page=True)
            finally:
                await browser.close()
                server.should_exit = True
                await serving
    for name in ("inspector-user.png", "inspector-why.png"):
        assert (IMAGES / name).stat().st_size > 10_000
