"""A user seeded through the real broker for the inspector's tests: a transcript import,
chat turns (one with XSS payloads) and a worker pass that makes a fact, then an inspector
built by its own wiring on the same settings."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.inspector.app import create_app
from llm_bot.inspector.wiring import Inspector, build_inspector
from llm_bot.memory.conversation_key import ConversationKey
from tests.integration.test_memory_worker import say, settled
from tests.integration.test_transcript_import import transcript_event
from tests.support.events import message_event, new_id
from tests.support.harness import bot, running_worker, settings_for_test
from tests.support.services import ServiceUrls

XSS = (
    '<script>window.pwned=1</script> <img src=x onerror="window.pwned=2"> '
    '<a href="javascript:window.pwned=3">click</a> \u202egnp.exe'
)
PLANTED = "The user lives in Chiang Mai."


@dataclass(frozen=True)
class Seeded:
    tenant_id: str
    user_id: str
    first: ConversationKey
    """Imported history plus chat turns; finalized, so its facts are in long-term memory."""
    second: ConversationKey
    """A live conversation holding the XSS payload in its window."""


async def seed_user(settings: Settings) -> Seeded:
    tenant, user = new_id("tinsp"), new_id("u")
    first = ConversationKey(tenant, user, new_id("c"))
    second = ConversationKey(tenant, user, new_id("c"))
    async with bot(settings) as (_service, client), running_worker(settings):
        history = [
            {"role": "user", "text": "Hello, I am planning a trip.", "name": "Ann"},
            {"role": "assistant", "text": "Where would you like to go?"},
        ]
        await client.publish(transcript_event(first, history))
        await say(client, first, "my name is Ann")
        await say(client, first, "I moved to Chiang Mai last spring")
        await say(client, first, "the weather is nice today")
        await client.publish(
            message_event(
                tenant=tenant,
                user=user,
                conversation=first.conversation_id,
                text=None,
                event_type="conversation.end",
            )
        )
        await settled(client)
        await say(client, second, XSS)
        await settled(client)
    return Seeded(tenant, user, first, second)


@asynccontextmanager
async def inspector_settings(urls: ServiceUrls, keys: str) -> AsyncIterator[Settings]:
    """Settings for a test with the memory worker's fake model serving (a small window, so
    turns compact into long-term memory) and ``keys`` as ``LLM_BOT_INSPECTOR_KEYS``."""
    async with FakeModelServer(responder=memory_responder) as model:
        yield settings_for_test(
            urls,
            model.base_url,
            memory_max_messages=4,
            retry_base_seconds=0.05,
            inspector_keys=keys,
            retrieval_timeout_ms=5000,
        )


@asynccontextmanager
async def inspector_for(settings: Settings) -> AsyncIterator[Inspector]:
    inspector = build_inspector(settings)
    try:
        yield inspector
    finally:
        await inspector.close()


def client_for(inspector: Inspector, address: str = "127.0.0.1") -> httpx.AsyncClient:
    """An HTTP client of the inspector's app (ASGI, in this process), its requests from
    the client ``address``."""
    transport = httpx.ASGITransport(app=create_app(inspector), client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://inspector.test")


async def login(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post("/login", data={"key": key})


def csrf_of(html: str) -> str:
    """The CSRF token a page's form carries."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None, "no CSRF token on the page"
    return match[1]
