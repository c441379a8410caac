"""The memory inspector over HTTP (ASGI, no browser): pages and their JSON twins read a user
seeded through the broker; login cookie flags, CSRF, tenant isolation (404, no oracle),
XSS payloads rendered as text, and forgetting a conversation through the CLI's code."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import Settings
from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.app import CSP
from llm_bot.inspector.wiring import Inspector
from tests.support.inspector import (
    PLANTED,
    XSS,
    Seeded,
    client_for,
    csrf_of,
    inspector_for,
    inspector_settings,
    login,
    seed_user,
)
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

KEY_ALL, KEY_OTHER = "inspect-all-key", "inspect-other-key"


@pytest.fixture
async def seeded(service_urls: ServiceUrls) -> AsyncIterator[tuple[Settings, Seeded]]:
    """A user seeded through the broker, with the memory worker's fake model running."""
    async with inspector_settings(
        service_urls, f"*={key_digest(KEY_ALL)},tother={key_digest(KEY_OTHER)}"
    ) as settings:
        yield settings, await seed_user(settings)


@pytest.fixture
async def inspector(seeded: tuple[Settings, Seeded]) -> AsyncIterator[Inspector]:
    async with inspector_for(seeded[0]) as running:
        yield running


async def test_login_cookie_is_httponly_and_samesite_strict(inspector: Inspector) -> None:
    """A configured key opens a session in an HttpOnly, SameSite=Strict cookie; another key
    is refused; pages carry a CSP allowing the package's own scripts only."""
    async with client_for(inspector) as client:
        assert (await login(client, "not-a-key")).status_code == 401
        response = await login(client, KEY_ALL)
        assert response.status_code == 303
        cookie = response.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        page = await client.get("/")
        assert page.headers["content-security-policy"] == CSP
        assert "script-src 'self';" in CSP
        assert "unsafe-inline" not in CSP


async def test_pages_and_json_twins_show_the_seeded_user(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """The tenant lists the user; the user's JSON holds the planted fact with its source;
    the conversation shows its window; why recalls the fact with its scores."""
    _, user = seeded
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        tenant = (await client.get(f"/t/{user.tenant_id}", params={"format": "json"})).json()
        assert [u["user_id"] for u in tenant["users"]] == [user.user_id]
        base = f"/t/{user.tenant_id}/u/{user.user_id}"
        data = (await client.get(base, params={"format": "json"})).json()
        facts = {f["value"]: f for f in data["facts"]}
        assert PLANTED in facts
        assert facts[PLANTED]["sources"][0]["conversation_id"] == user.first.conversation_id
        assert data["index_entries"] > 0
        html = (await client.get(base)).text
        assert PLANTED in html
        conversation = f"{base}/c/{user.second.conversation_id}"
        window = (await client.get(conversation, params={"format": "json"})).json()
        messages = window["working_memory"]["messages"]
        assert messages
        assert all(m["tokens"] > 0 for m in messages)  # per message, summing to each turn's
        by_turn = {row["turn"]: row["tokens"] for row in window["window_tokens_by_turn"]}
        assert by_turn == {
            turn: sum(m["tokens"] for m in messages if m["turn"] == turn) for turn in by_turn
        }
        page = (await client.get(conversation)).text
        row = re.search(r'<tr id="m-[^"]+">(.*?)</tr>', page)
        assert row is not None
        assert re.search(r"<td>\d+</td>$", row[1])  # the Tokens column is filled
        why = await client.get(
            f"{base}/c/{user.second.conversation_id}/why",
            params={"message": "Where do I live now, Chiang Mai?", "format": "json"},
        )
        result = why.json()["result"]
        assert result["retrieval"] == "searched"
        planted = [i for i in result["recalled"] if "Chiang Mai" in i["text"]]
        assert planted
        assert planted[0]["keyword_score"] > 0
        assert planted[0]["fused_rank"] >= 1
        assert {s["name"] for s in result["sections"]} == {
            "system",
            "memory",
            "window",
            "current turn",
        }


async def test_a_key_for_another_tenant_gets_404_everywhere(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """Every URL of the seeded tenant answers 404 to a key for another tenant, exactly as a
    tenant that does not exist; invalid ids are 404 too."""
    _, user = seeded
    base = f"/t/{user.tenant_id}/u/{user.user_id}"
    conversation = f"{base}/c/{user.first.conversation_id}"
    async with client_for(inspector) as client:
        await login(client, KEY_OTHER)
        for url in (
            f"/t/{user.tenant_id}",
            base,
            conversation,
            f"{conversation}/why?message=hi",
            f"{conversation}/forget",
            f"{base}/forget",
            f"{base}/export",
            f"{base}/f/fact_0123/remove",
            f"{base}/f/fact_0123/correct",
            "/dlq",
            "/dlq/events/replay?code=invalid_event",
            "/t/no-such-tenant",
            "/t/tother/u/bad%7Cid",
        ):
            response = await client.get(url)
            assert response.status_code == 404, url
        refused = await client.post(f"{conversation}/forget", data={"csrf": "x"})
        assert refused.status_code == 404


async def test_a_post_without_the_csrf_token_is_refused(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """Forgetting needs the session's CSRF token; without it nothing is erased. With it,
    the conversation is gone from the pages and from Redis."""
    settings, user = seeded
    conversation = f"/t/{user.tenant_id}/u/{user.user_id}/c/{user.first.conversation_id}"
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        assert (await client.post(f"{conversation}/forget", data={})).status_code == 403
        assert (await client.post(f"{conversation}/forget", data={"csrf": "no"})).status_code == 403
        assert await inspector.base.redis.exists(keys.raw_trace(user.first))
        confirm = (await client.get(f"{conversation}/forget")).text
        assert "raw trace" in confirm
        done = await client.post(f"{conversation}/forget", data={"csrf": csrf_of(confirm)})
        assert done.status_code == 200
        assert not await inspector.base.redis.exists(keys.raw_trace(user.first))
        assert not await inspector.base.redis.exists(keys.conversation_meta(user.first))
        tenant = (await client.get(f"/t/{user.tenant_id}", params={"format": "json"})).json()
        listed = {c["conversation_id"] for c in tenant["conversations"]}
        assert user.first.conversation_id not in listed
    assert (
        inspector.metrics.registry.get_sample_value(
            "llmbot_inspector_actions_total",
            {"action": "forget_conversation", "outcome": "done"},
        )
        == 1.0
    )


async def test_the_user_page_offers_the_export_as_an_audited_download(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """The user page links the download; it is the user's line of ``llm-bot memory
    export`` (their conversations, facts and index entries), counted as an action."""
    _, user = seeded
    base = f"/t/{user.tenant_id}/u/{user.user_id}"
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        assert f'href="{base}/export"' in (await client.get(base)).text
        response = await client.get(f"{base}/export")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.headers["content-disposition"].startswith("attachment;")
    (line,) = response.text.splitlines()
    record = json.loads(line)
    assert (record["format"], record["tenant"], record["user"]) == (
        "llm-bot.memory",
        user.tenant_id,
        user.user_id,
    )
    conversations = {c["id"] for c in record["conversations"]}
    assert {user.first.conversation_id, user.second.conversation_id} <= conversations
    assert PLANTED in json.dumps(record["long_term"]["facts"])
    assert (
        inspector.metrics.registry.get_sample_value(
            "llmbot_inspector_actions_total", {"action": "export_user", "outcome": "done"}
        )
        == 1.0
    )


async def test_xss_payloads_render_as_text(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """A message holding <script>, <img onerror>, a javascript: link and a bidi override
    renders escaped, the override shown as a visible mark."""
    _, user = seeded
    conversation = f"/t/{user.tenant_id}/u/{user.user_id}/c/{user.second.conversation_id}"
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        html = (await client.get(conversation)).text
    assert "<script>window" not in html
    assert "<img src=x" not in html
    assert '<a href="javascript:' not in html
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    assert "\u202e" not in html
    assert "⟨U+202E⟩gnp.exe" in html
    assert XSS not in html


async def test_the_user_page_counts_entries_without_a_vector_and_dates_retention(
    inspector: Inspector, seeded: tuple[Settings, Seeded]
) -> None:
    """Every entry the worker indexed has a vector; one whose vector is lost counts as
    without. Retention is shown per kind as dates: nothing recorded before today minus the
    configured days, and the day the oldest fact goes."""
    settings, user = seeded
    base = f"/t/{user.tenant_id}/u/{user.user_id}"
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    vectors = keys.recall_index(user.tenant_id, user.user_id, "vec")
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        before = (await client.get(base, params={"format": "json"})).json()
        assert before["index_entries"] > 0
        assert before["index_entries_without_vector"] == 0
        [lost, *_] = await inspector.base.redis.hkeys(vectors)
        assert await inspector.base.redis.hdel(vectors, lost) == 1
        after = (await client.get(base, params={"format": "json"})).json()
        html = (await client.get(base)).text
    assert after["index_entries_without_vector"] == 1
    assert 'id="without-vector">1<' in html
    horizon = {row["kind"]: row for row in after["retention"]}
    assert set(horizon) == {"profile", "facts", "episodes", "events"}
    days = settings.ltm_retention_days
    assert horizon["facts"]["kept_since"] == str(datetime.now(UTC).date() - timedelta(days=days))
    assert horizon["facts"]["held"] == len(after["facts"]) > 0
    oldest = min(f["updated_at"] for f in after["facts"])
    goes = datetime.fromisoformat(oldest) + timedelta(days=days)
    assert horizon["facts"]["next_goes"] == goes.date().isoformat()
    assert horizon["facts"]["kept_since"] in html
