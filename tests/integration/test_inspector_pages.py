"""A user with more facts than a page holds: the user page lists them a page at a time
(current first, by importance), HTML and JSON alike."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from llm_bot.bootstrap import long_term_store, redis_client
from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.views import PAGE_SIZE
from llm_bot.memory.long_term import SemanticFact, Source
from tests.support.events import new_id
from tests.support.inspector import client_for, inspector_for, inspector_settings, login
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

KEY = "inspect-pages-key"


async def test_a_users_facts_are_paginated(service_urls: ServiceUrls) -> None:
    tenant, user = "tpages", new_id("u")
    total = PAGE_SIZE * 2 + 7
    now = datetime.now(UTC).isoformat()
    facts = [
        SemanticFact(
            id=f"f{n:03d}",
            fact=f"Fact number {n}.",
            confidence=1.0,
            salience=round(1.0 - n / 1000, 3),  # f000 the most important
            sources=(Source(conversation_id="c1", turns=(1,)),),
            created_at=now,
            updated_at=now,
        )
        for n in range(total)
    ]
    async with inspector_settings(service_urls, f"*={key_digest(KEY)}") as settings:
        client = redis_client(settings.redis)
        try:
            await long_term_store(settings, client).write(tenant, user, erasure="", facts=facts)
        finally:
            await client.aclose()
        async with inspector_for(settings) as inspector, client_for(inspector) as http:
            await login(http, KEY)
            first = (await http.get(f"/t/{tenant}/u/{user}?format=json")).json()
            last = (await http.get(f"/t/{tenant}/u/{user}?page=3&format=json")).json()
            html = (await http.get(f"/t/{tenant}/u/{user}?page=2")).text
    assert first["facts_page"] == {"page": 1, "pages": 3, "total": total}
    assert [f["id"] for f in first["facts"]] == [f"f{n:03d}" for n in range(PAGE_SIZE)]
    assert [f["id"] for f in last["facts"]] == [f"f{n:03d}" for n in range(2 * PAGE_SIZE, total)]
    assert f"Fact number {PAGE_SIZE}." in html
    assert "Fact number 0." not in html
    assert f"Facts ({total})" in html
