"""``llm-bot memory fact remove|correct``: the inspector's fact actions from the terminal.

The same code as the inspector's buttons (``actions.remove_fact`` / ``actions.correct_fact``:
the ``FactEditor`` with the user's lease and the index reconciliation, then the audit: an
``inspector.action`` event whose key is ``cli``, ids only, and
``llmbot_inspector_actions_total`` by action in the process's registry). Like the
inspector's confirmation, the terminal first names what will go or change; only with
``confirmed`` is anything written.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from llm_bot.config import Settings
from llm_bot.inspector import actions
from llm_bot.inspector.access_keys import ALL_TENANTS, InspectorKeys, Scope
from llm_bot.inspector.wiring import Inspector, build_inspector
from llm_bot.memory.fact_edits import FactEditRefused, correction, current_fact, removal
from llm_bot.memory.long_term import SemanticFact

TERMINAL = Scope(tenant=ALL_TENANTS, name="cli")
"""Who acts, in the audit event: the terminal's user (who reads Redis already), not a key."""


@dataclass(frozen=True)
class FactEdit:
    """What the command printed, and whether it wrote anything."""

    lines: tuple[str, ...]
    done: bool


async def remove_fact(
    settings: Settings,
    tenant_id: str,
    user_id: str,
    fact_id: str,
    *,
    confirmed: bool,
    registry: CollectorRegistry | None = None,
) -> FactEdit:
    """Name the fact and what becomes current again; with ``confirmed``, remove it.
    ``FactEditRefused`` (one line) for an unknown user or a fact that is not current."""
    inspector = build_inspector(settings, keys=InspectorKeys(), registry=registry)
    try:
        facts = await _facts(inspector, tenant_id, user_id)
        fact = current_fact(facts, fact_id)
        revived = [f.fact for f in removal(facts, fact_id).rewritten if f.superseded_by is None]
        lines = [f"remove fact {fact_id}: {fact.fact}"]
        lines += [f"current again (it had replaced it): {value}" for value in revived]
        if not confirmed:
            return FactEdit(tuple(lines), done=False)
        await actions.remove_fact(inspector, TERMINAL, tenant_id, user_id, fact_id)
        return FactEdit((*lines, f"removed {fact_id}"), done=True)
    finally:
        await inspector.close()


async def correct_fact(
    settings: Settings,
    tenant_id: str,
    user_id: str,
    fact_id: str,
    value: str,
    *,
    confirmed: bool,
    registry: CollectorRegistry | None = None,
) -> FactEdit:
    """Name the current and the new value; with ``confirmed``, the new value supersedes the
    fact (provenance ``operator``). ``FactEditRefused`` (one line) for an unknown user, a
    fact that is not current, or a value that is empty, too long or already a fact."""
    inspector = build_inspector(settings, keys=InspectorKeys(), registry=registry)
    try:
        facts = await _facts(inspector, tenant_id, user_id)
        fact = current_fact(facts, fact_id)
        new = correction(facts, fact_id, value, now="").current.fact  # refused before asking
        lines = [
            f"correct fact {fact_id}: {fact.fact}",
            f"new value (supersedes it, provenance operator): {new}",
        ]
        if not confirmed:
            return FactEdit(tuple(lines), done=False)
        change = await actions.correct_fact(
            inspector, TERMINAL, tenant_id, user_id, fact_id, value=value
        )
        return FactEdit((*lines, f"{fact_id} superseded by {change.current.id}"), done=True)
    finally:
        await inspector.close()


async def _facts(inspector: Inspector, tenant_id: str, user_id: str) -> list[SemanticFact]:
    """The user's facts; ``FactEditRefused`` naming the user when there are none."""
    facts = await inspector.ltm.facts(tenant_id, user_id)
    if facts:
        return facts
    if await inspector.directory.conversations(tenant_id, user_id):
        raise FactEditRefused(f"user {user_id} of tenant {tenant_id} has no facts")
    raise FactEditRefused(f"no user {user_id} in tenant {tenant_id} (nothing stored)")
