"""``llm-bot memory export`` and ``import`` (SPEC 7.2.1; docs/memory.md "Export and
import"): a user with imported history, facts, a finished conversation and an open flow is
exported, every key of theirs deleted, and imported: ``memory show``, ``memory why`` for
three questions and the prompt the next message would get are the same as before, the
export of the import is the export, importing twice changes nothing, and the service
carries on (the flow answers the next message). Import refuses a user being erased and a
file of another tenant unless told.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from llm_bot.adapters.redis_erasure import ErasureMarks
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import redis_client
from llm_bot.config import ConfigurationError, Settings
from llm_bot.entrypoints.memory_cli import forget_memory, show_memory
from llm_bot.entrypoints.memory_transfer import export_memory, import_memory
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.inspector.serve import why
from llm_bot.memory.conversation_key import ConversationKey
from tests.integration.test_flows import PERSONAS
from tests.integration.test_transcript_import import HISTORY, acked, transcript_event
from tests.support.checks import key_text
from tests.support.conversations import finalized, say_and_end
from tests.support.events import conversation_event, new_id
from tests.support.harness import bot, running_worker, settings_for_test
from tests.support.processes import CHILD_WITHIN_SECONDS, settings_env
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
QUESTIONS = ("What is my name?", "Which language do I speak?", "What did Melanie paint?")


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


async def _export(settings: Settings, tenant: str, user: str | None = None) -> list[dict[str, Any]]:
    out = io.StringIO()
    await export_memory(settings, tenant, user, out, progress=lambda _: None)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _without_time(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k != "exported_at"} for record in records]


async def _seen(settings: Settings, keys: list[ConversationKey]) -> dict[str, Any]:
    """What the user's memory looks like from outside: show, why, the next prompt."""
    history, flow = keys
    fresh = ConversationKey(history.tenant_id, history.user_id, "c-next")
    return {
        "show": [await show_memory(settings, key) for key in keys],
        "why": [await why(settings, history, question, AT) for question in QUESTIONS],
        "next prompt": (await why(settings, fresh, "hello again, it's me", AT))["prompt"],
        "flow prompt": (await why(settings, flow, "yes", AT))["prompt"],
    }


async def _delete_user(settings: Settings, tenant: str, user: str) -> int:
    keys = RedisKeys(prefix=settings.redis_key_prefix)
    client = redis_client(settings.redis)
    try:
        names = [key_text(n) async for n in client.scan_iter(match=keys.user_pattern(tenant, user))]
        return int(await client.unlink(*names)) if names else 0
    finally:
        await client.aclose()


async def test_a_user_exported_deleted_and_imported_is_the_same_user(
    service_urls: ServiceUrls, memory_model: FakeModelServer, tmp_path: Path
) -> None:
    personas = tmp_path / "personas.yaml"
    personas.write_text(PERSONAS, encoding="utf-8")
    settings = settings_for_test(
        service_urls,
        memory_model.base_url,
        personas_path=str(personas),
        memory_max_messages=4,
        retry_base_seconds=0.05,
    )
    tenant, user = new_id("t"), new_id("u")
    history = ConversationKey(tenant, user, new_id("c"))
    flow = ConversationKey(tenant, user, new_id("c"))
    async with bot(settings) as (service, client), running_worker(settings):
        await client.publish(transcript_event(history, HISTORY))
        await acked(client, service)
        await say_and_end(client, history, ["my name is Ann", "I speak Thai", "I like tea"])
        await finalized(service, client, history)
        await client.publish(conversation_event(flow, "hi", metadata={"persona": "checkin"}))
        await client.next_candidate()
        await client.publish(conversation_event(flow, "5"))
        await client.next_candidate()

        before = await _seen(settings, [history, flow])
        exported = await _export(settings, tenant, user)
        (record,) = exported
        assert [c["id"] for c in record["conversations"]] == sorted(
            [history.conversation_id, flow.conversation_id]
        )
        assert record["long_term"]["facts"]
        assert record["index"]["entries"]
        assert any(c["flow"] for c in record["conversations"])
        assert before["show"][0]["long_term"]["facts"]
        assert before["show"][1]["flow"]["status"] == "running"

        assert await _delete_user(settings, tenant, user) > 10
        assert (await show_memory(settings, history))["long_term"]["facts"] == []

        lines = [json.dumps(r) for r in exported]
        for _ in range(2):  # idempotent
            result = await import_memory(
                settings, lines, tenant_id=tenant, from_tenant=None, progress=lambda _: None
            )
            assert (result.imported, result.refused) == (1, 0)
            assert result.index_entries == len(record["index"]["entries"])
        after = await _seen(settings, [history, flow])
        assert after == before
        again = _without_time(await _export(settings, tenant, user))
        assert again == _without_time(exported)

        # The service carries on with the imported memory: the flow takes its next answer.
        await client.publish(conversation_event(flow, "yes"))
        answered = (await client.next_candidate()).body
        assert "What will you drink?" in answered["text"]


async def test_import_refuses_another_tenant_unless_told_and_a_user_being_erased(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = make_settings(embeddings="off")
    tenant, user = new_id("t"), new_id("u")
    key = ConversationKey(tenant, user, new_id("c"))
    async with bot(settings) as (_, client):
        await client.publish(conversation_event(key, "my name is Ann"))
        await client.next_candidate()
    lines = [json.dumps(r) for r in await _export(settings, tenant)]
    assert len(lines) == 1

    other = new_id("t")
    with pytest.raises(ConfigurationError, match="--from-tenant"):
        await import_memory(settings, lines, tenant_id=other, from_tenant=None, progress=print)
    moved = await import_memory(
        settings, lines, tenant_id=other, from_tenant=tenant, progress=print
    )
    assert moved.imported == 1
    moved_key = ConversationKey(other, user, key.conversation_id)
    moved_memory = (await show_memory(settings, moved_key))["working_memory"]
    assert moved_memory is not None
    assert moved_memory == (await show_memory(settings, key))["working_memory"]

    redis = redis_client(settings.redis)
    marks = ErasureMarks(client=redis, keys=RedisKeys(prefix=settings.redis_key_prefix))
    erasure = await marks.begin(tenant, user)
    try:
        refused = await import_memory(
            settings, lines, tenant_id=tenant, from_tenant=None, progress=print
        )
    finally:
        await marks.end(tenant, user, erasure)
        await redis.aclose()
    assert (refused.imported, refused.refused) == (0, 1)


async def _cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        "memory",
        *args,
        env=settings_env(settings),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CHILD_WITHIN_SECONDS)
    return int(process.returncode or 0), out.decode(), err.decode()


async def test_the_commands_export_to_a_file_and_import_it_and_skip_erased_users(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    settings = make_settings(embeddings="off", log_format="json")
    tenant, kept, erased = new_id("t"), new_id("u"), new_id("u")
    async with bot(settings) as (_, client):
        for user in (kept, erased):
            await client.publish(conversation_event(ConversationKey(tenant, user, "c1"), "hi"))
            await client.next_candidate()
    await forget_memory(settings, tenant, erased, "*")  # only its erasure mark is left
    path = tmp_path / "memory.jsonl"

    status, _, err = await _cli(settings, "export", "--tenant", tenant, "-o", str(path))
    assert status == 0, err
    assert "exported 1/2 users" in err  # progress on stderr; the erased user left out
    assert [json.loads(line)["user"] for line in path.read_text().splitlines()] == [kept]

    other = new_id("t")
    status, _, err = await _cli(settings, "import", str(path), "--tenant", other)
    assert status == 2
    assert err.strip().splitlines()[-1].startswith("llm-bot: line 1 holds tenant")
    status, out, err = await _cli(
        settings, "import", str(path), "--tenant", other, "--from-tenant", tenant
    )
    assert (status, out.strip()) == (0, "imported 1 users (0 index entries re-embedded)"), err
    assert (await show_memory(settings, ConversationKey(other, kept, "c1")))["last_turn"] == 1
