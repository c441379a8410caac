"""Corrections through the broker (SPEC 5.5): the user changes four facts in a later
conversation; long-term memory ends with the new values current and the old ones
superseded, and the next prompt shows only the new ones. The fake summarizer answers as a
real one would, from the stored facts the worker sends it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from llm_bot.entrypoints.memory_cli import render_memory, show_memory
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.conversations import finalized, say_and_end
from tests.support.events import message_event, new_id
from tests.support.harness import bot, running_worker, settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

BEFORE = [
    "Hi! I am vegetarian, just so you know.",
    "my phone number is 081-234-5678",
    "I live in Bangkok near the river",
    "I prefer weekend delivery please",
]
AFTER = [
    "Update: I'm not vegetarian anymore.",
    "my new phone number is 089-765-4321",
    "I moved to Chiang Mai last month",
    "I now prefer weekday delivery, I work from home",
]
OLD_FACTS = [
    "The user is vegetarian.",
    "The user's phone number is 081-234-5678.",
    "The user lives in Bangkok.",
    "The user prefers weekend delivery.",
]
NEW_FACTS = [
    "The user is not vegetarian.",
    "The user's phone number is 089-765-4321.",
    "The user lives in Chiang Mai.",
    "The user prefers weekday delivery.",
]


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


async def test_corrections_supersede_and_the_next_prompt_carries_only_the_new_values(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    settings = settings_for_test(service_urls, model.base_url, retry_base_seconds=0.05)
    user = new_id("u")
    first, second, third = (ConversationKey("tfix", user, new_id("c")) for _ in range(3))
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        await say_and_end(client, first, BEFORE)
        await finalized(service, client, first)
        await say_and_end(client, second, AFTER)
        await finalized(service, client, second)
        await client.publish(
            message_event(
                tenant="tfix",
                user=user,
                conversation=third.conversation_id,
                text="Remind me: my phone number, where I live, whether I am vegetarian, "
                "and which delivery days I prefer?",
            )
        )
        await client.next_candidate()
        facts = await worker.ltm.facts("tfix", user)
        bundle = await worker.ltm.bundle("tfix", user)
        shown = render_memory(await show_memory(settings, third))
    current = sorted(f.fact for f in facts if f.superseded_by is None)
    superseded = {f.fact: f for f in facts if f.superseded_by is not None}
    assert current == sorted(NEW_FACTS)
    assert sorted(superseded) == sorted(OLD_FACTS)
    by_id = {f.id: f for f in facts}
    for old, new in zip(OLD_FACTS, NEW_FACTS, strict=True):
        assert by_id[superseded[old].superseded_by or ""].fact == new
    assert sorted(f.fact for f in bundle.facts) == sorted(NEW_FACTS)
    # The second conversation's summarizer saw the stored facts it corrected.
    summarizer = [r for r in model.chat_requests() if schema_name(r) == "memory_compaction"]
    seen = [json.loads(r.last_user_text())["stored_facts"] for r in summarizer]
    assert any(sorted(f["fact"] for f in s) == sorted(OLD_FACTS) for s in seen)
    # `llm-bot memory show` lists the superseded facts too, marked.
    for old in OLD_FACTS:
        assert f"- {old} (confidence" in shown
        assert "superseded by fact_" in shown.split(f"- {old} (confidence", 1)[1].splitlines()[0]
    # The next prompt, asking about all four, carries the new values and none of the old:
    # not as facts, not in an episode, not as a recalled message.
    request = [r for r in model.chat_requests() if schema_name(r) is None][-1]
    memory = request.memory()
    assert memory is not None
    assert sorted(memory["facts"]) == sorted(NEW_FACTS)
    assert memory["recalled"]
    assert "089-765-4321" in json.dumps(memory, ensure_ascii=False)
    text = "\n".join(str(m["content"]) for m in request.messages())
    for stale in ("081-234-5678", "Bangkok", "weekend", "vegetarian, just so you know"):
        assert stale not in text


async def test_a_thai_correction_supersedes_the_thai_fact(
    service_urls: ServiceUrls, model: FakeModelServer
) -> None:
    """The same in Thai: "I am vegetarian", later "I am not vegetarian any more"."""
    settings = settings_for_test(service_urls, model.base_url, retry_base_seconds=0.05)
    user = new_id("u")
    first, second = (ConversationKey("tfix", user, new_id("c")) for _ in range(2))
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        await say_and_end(client, first, ["สวัสดีครับ ผมเป็นมังสวิรัติ"])
        await finalized(service, client, first)
        await say_and_end(client, second, ["ตอนนี้ผมไม่ได้เป็นมังสวิรัติแล้วครับ"])
        await finalized(service, client, second)
        facts = await worker.ltm.facts("tfix", user)
    assert sorted((f.fact, f.superseded_by is None) for f in facts) == [
        ("ผู้ใช้เป็นมังสวิรัติ", False),
        ("ผู้ใช้ไม่ได้เป็นมังสวิรัติ", True),
    ]
