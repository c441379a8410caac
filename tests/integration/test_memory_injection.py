"""Memory is data, never instructions (SPEC 5.3, OWASP LLM01), end to end: known
prompt-injection strings imported as what users once said (``transcript``), compacted into
facts by the memory worker, and recalled in a later conversation reach the model only as
quoted data in the memory message: never in the system role, never able to close the
fence or end their JSON string."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from llm_bot.bootstrap import Worker
from llm_bot.fake_model import FakeModelServer, RecordedRequest
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.memory_message import MEMORY_FENCE_CLOSE, MEMORY_FENCE_OPEN, read_memory
from llm_bot.memory.stored_text import is_invisible, sanitize
from tests.integration.test_transcript_import import transcript_event
from tests.support.conversations import finalized
from tests.support.events import message_event, new_id
from tests.support.harness import bot, running_worker, settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

STRINGS_FILE = Path(__file__).parent.parent / "data" / "injection_strings.txt"
SYSTEM_PROMPT = "You are the assistant of a home-goods store. Be brief."
BATCH = 20
"""Strings per user: the summarizer keeps at most 20 facts per compaction, and the prompt's
long-term bundle holds a user's 20 best facts."""
_ESCAPE = re.compile(r"\\n|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})")


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2)
    return chr(int(code, 16)) if code else "\n"


def injection_strings() -> list[str]:
    """The strings of ``tests/data/injection_strings.txt`` (see its header for the format)."""
    lines = STRINGS_FILE.read_text(encoding="utf-8").splitlines()
    return [_ESCAPE.sub(_unescape, line) for line in lines if line and not line.startswith("# ")]


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


def test_the_data_file_holds_the_classic_attacks() -> None:
    """At least 50 distinct strings, the classic families among them, Thai included."""
    strings = injection_strings()
    assert len(strings) >= 50
    assert len(set(strings)) == len(strings)
    text = "\n".join(strings)
    for family in ("Ignore previous instructions", "SYSTEM OVERRIDE", "</memory>", "```"):
        assert family in text
    for family in ("DAN", "### Instruction:", "<|im_start|>system", "base64", "[MEMORY:"):
        assert family in text
    assert any(re.search("[\u0e00-\u0e7f]", s) for s in strings)
    assert any(any(is_invisible(c) for c in s) for s in strings)


async def bundled(worker: Worker, user: str, facts: int, within: float = 30) -> None:
    """Wait until the user's long-term bundle holds ``facts`` facts (the finalizing job may
    still be writing when the conversation's working memory is already gone)."""
    async with asyncio.timeout(within):
        while len((await worker.ltm.bundle("tinj", user)).facts) < facts:
            await asyncio.sleep(0.05)


def transcript(strings: list[str]) -> list[dict[str, Any]]:
    """Each string said by the user as a note for later (the fake summarizer's rule that
    makes the rest of the message a fact), each acknowledged."""
    messages: list[dict[str, Any]] = []
    for text in strings:
        messages.append({"role": "user", "text": f"note for later: {text}", "name": "Mallory"})
        messages.append({"role": "assistant", "text": "Noted.", "name": "Shop"})
    return messages


def assert_quoted_as_data(request: RecordedRequest, strings: list[str]) -> None:
    """The system role holds the operator's prompt alone; the memory message follows it,
    holds every string as a fact, and no string ends its JSON string or the fence."""
    messages = request.messages()
    assert [m for m in messages if m["role"] == "system"] == [
        {"role": "system", "content": SYSTEM_PROMPT}
    ]
    assert messages[0]["role"] == "system"
    memory = messages[1]
    assert memory["role"] == "user"
    content = str(memory["content"])
    lines = content.split("\n")
    assert [line for line in lines if "`" in line] == [MEMORY_FENCE_OPEN, MEMORY_FENCE_CLOSE]
    assert lines[-1] == MEMORY_FENCE_CLOSE
    body = content[content.index(f"{MEMORY_FENCE_OPEN}\n") + len(MEMORY_FENCE_OPEN) + 1 :]
    body = body.removesuffix(f"\n{MEMORY_FENCE_CLOSE}")
    assert not set(body) & set("<>`")
    assert not any(is_invisible(c) for c in body if c != "\n")
    document = json.loads(body)
    assert document == read_memory(memory) == request.memory()
    facts = document["facts"]
    assert all(isinstance(fact, str) for fact in facts)
    for text in strings:
        assert sanitize(text) in facts, text
        assert sanitize(text) not in SYSTEM_PROMPT
        if re.search("[\u0e00-\u0e7f]", text):  # Thai text reaches the model as written
            assert text.strip() in facts


async def test_injection_strings_reach_a_later_prompt_only_as_quoted_data(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> None:
    """Every string of the data file, imported, compacted into a fact and recalled in a new
    conversation, sits in the memory message's JSON as one fact, verbatim but sanitised."""
    strings = injection_strings()
    batches = [strings[i : i + BATCH] for i in range(0, len(strings), BATCH)]
    settings = settings_for_test(
        service_urls,
        memory_model.base_url,
        system_prompt=SYSTEM_PROMPT,
        retry_base_seconds=0.05,
    )
    users = [new_id("u") for _ in batches]
    async with bot(settings) as (service, client), running_worker(settings) as worker:
        for user, batch in zip(users, batches, strict=True):
            key = ConversationKey("tinj", user, new_id("c"))
            await client.publish(transcript_event(key, transcript(batch)))
            end = message_event(
                tenant="tinj",
                user=user,
                conversation=key.conversation_id,
                text=None,
                event_type="conversation.end",
            )
            await client.publish(end)
            await finalized(service, client, key)
            await bundled(worker, user, len(batch))
        prompts = []
        for user in users:
            later = message_event(
                tenant="tinj", user=user, conversation=new_id("c"), text="What did I note?"
            )
            await client.publish(later)
            await client.next_candidate()
            replies = [r for r in memory_model.chat_requests() if schema_name(r) is None]
            prompts.append(replies[-1])
    for request, batch in zip(prompts, batches, strict=True):
        assert request.last_user_text() == "What did I note?"
        assert_quoted_as_data(request, batch)
