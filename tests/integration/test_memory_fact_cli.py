"""``llm-bot memory fact remove|correct`` on real Redis and RabbitMQ: the inspector's fact
actions from the terminal, through the same code (the fact editor, the index following,
the ``inspector.action`` audit with ids only); nothing changes without ``--yes``; invalid
ids, unknown users and facts get one clear line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from llm_bot.cli.memory import run_memory
from llm_bot.cli.parser import build_parser
from llm_bot.config import ConfigurationError, Settings
from llm_bot.inspector import fact_commands
from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.long_term import SemanticFact
from llm_bot.memory.recall_items import LONG_TERM_PREFIX, long_term_entry_id
from tests.support.events import new_id
from tests.support.inspector import PLANTED, Seeded, inspector_for, inspector_settings, seed_user
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

CORRECTED = "The user lives in Lamphun."


@pytest.fixture
async def seeded(
    service_urls: ServiceUrls,
) -> AsyncIterator[tuple[Settings, Inspector, Seeded]]:
    async with inspector_settings(service_urls, f"*={key_digest('unused')}") as settings:
        user = await seed_user(settings)
        async with inspector_for(settings) as inspector:
            yield settings, inspector, user


async def run_cli(settings: Settings, *argv: str) -> int:
    """The CLI's own parser and ``memory`` dispatch (``asyncio.run`` inside: a thread)."""
    args = build_parser().parse_args(["memory", "fact", *argv])
    return await asyncio.to_thread(run_memory, args, settings)


async def fact_named(inspector: Inspector, user: Seeded, text: str) -> SemanticFact:
    facts = await inspector.ltm.facts(user.tenant_id, user.user_id)
    return next(f for f in facts if f.fact == text)


async def indexed_facts(inspector: Inspector, user: Seeded) -> set[str]:
    return set(await inspector.base.index.digests(user.tenant_id, user.user_id, LONG_TERM_PREFIX))


def audits(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "inspector.action"]


async def test_remove_names_the_fact_then_removes_it_with_yes_audited_without_text(
    seeded: tuple[Settings, Inspector, Seeded], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --yes: the fact named, exit 1, nothing removed, no audit; with --yes: gone
    from long-term memory and the index, one ``inspector.action`` event (key ``cli``, the
    ids, never the fact's text)."""
    settings, inspector, user = seeded
    fact = await fact_named(inspector, user, PLANTED)
    ids = ["--tenant", user.tenant_id, "--user", user.user_id, "--fact", fact.id]
    capsys.readouterr()
    with capture_logs() as logs:
        assert await run_cli(settings, "remove", *ids) == 1
        asked = capsys.readouterr()
        assert await fact_named(inspector, user, PLANTED) == fact
        assert audits(logs) == []
        assert await run_cli(settings, "remove", *ids, "--yes") == 0
    assert f"remove fact {fact.id}: {PLANTED}" in asked.out
    assert "nothing changed: add --yes to remove it" in asked.err
    assert f"removed {fact.id}" in capsys.readouterr().out
    remaining = await inspector.ltm.facts(user.tenant_id, user.user_id)
    assert fact.id not in {f.id for f in remaining}
    assert long_term_entry_id("facts", fact.id) not in await indexed_facts(inspector, user)
    [audit] = audits(logs)
    assert {k: audit[k] for k in ("action", "key", "tenant_id", "user_id", "fact_id")} == {
        "action": "remove_fact",
        "key": "cli",
        "tenant_id": user.tenant_id,
        "user_id": user.user_id,
        "fact_id": fact.id,
    }
    assert "Chiang Mai" not in repr(audit)
    assert await run_cli(settings, "remove", *ids, "--yes") == 1  # no longer a current fact
    assert f"{fact.id} is not a current fact of this user" in capsys.readouterr().err


async def test_correct_supersedes_the_fact_with_provenance_operator_and_counts_it(
    seeded: tuple[Settings, Inspector, Seeded], capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty value is refused before anything is asked; without --yes the old and new
    value are named and nothing is written; confirmed, the new value is current (source
    operator), the old one superseded and out of the index, the action counted once."""
    settings, inspector, user = seeded
    old = await fact_named(inspector, user, PLANTED)
    ids = ["--tenant", user.tenant_id, "--user", user.user_id, "--fact", old.id]
    capsys.readouterr()
    assert await run_cli(settings, "correct", *ids, "--value", "  ", "--yes") == 1
    assert "the new value is empty" in capsys.readouterr().err
    assert await run_cli(settings, "correct", *ids, "--value", CORRECTED) == 1
    asked = capsys.readouterr().out
    assert PLANTED in asked
    assert f"new value (supersedes it, provenance operator): {CORRECTED}" in asked
    assert (await fact_named(inspector, user, PLANTED)).superseded_by is None
    registry = CollectorRegistry()
    edit = await fact_commands.correct_fact(
        settings,
        user.tenant_id,
        user.user_id,
        old.id,
        CORRECTED,
        confirmed=True,
        registry=registry,
    )
    assert edit.done
    new = await fact_named(inspector, user, CORRECTED)
    assert new.superseded_by is None
    assert [s.provenance for s in new.sources] == ["operator"]
    assert (await fact_named(inspector, user, PLANTED)).superseded_by == new.id
    indexed = await indexed_facts(inspector, user)
    assert long_term_entry_id("facts", new.id) in indexed
    assert long_term_entry_id("facts", old.id) not in indexed
    sample = {"action": "correct_fact", "outcome": "done"}
    assert registry.get_sample_value("llmbot_inspector_actions_total", sample) == 1.0


async def test_unknown_users_and_facts_and_invalid_ids_get_one_line(
    service_urls: ServiceUrls, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id outside the id pattern is a configuration error naming the option (exit 2 in
    ``main``); a user with nothing stored exits 1 with the reason (a fact that is not
    current: the removal test)."""
    async with inspector_settings(service_urls, f"*={key_digest('unused')}") as settings:
        tenant, user = new_id("tfact"), new_id("u")
        with pytest.raises(ConfigurationError, match="--fact: 'a b' is not a valid id"):
            await run_cli(settings, "remove", "--tenant", tenant, "--user", user, "--fact", "a b")
        with pytest.raises(ConfigurationError, match="--user: "):
            await run_cli(settings, "remove", "--tenant", tenant, "--user", "u*", "--fact", "f")
        ids = ["--tenant", tenant, "--user", user, "--fact", "f1"]
        code = await run_cli(settings, "correct", *ids, "--value", "x", "--yes")
        assert code == 1
        err = capsys.readouterr().err
        assert f"llm-bot: memory fact correct: no user {user} in tenant {tenant}" in err
