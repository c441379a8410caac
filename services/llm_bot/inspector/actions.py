"""The inspector's actions, through the code the CLI and the worker run (``llm-bot memory
forget``, ``llm-bot memory export``, ``llm-bot dlq replay --code``, the worker's fact
supersession), each audited: a
structlog event naming the action, its outcome, the key's name and the ids (never any
text), and ``llmbot_inspector_actions_total`` by action and outcome (``done``, or
``failed``: a replay that stopped, its dead letters left in the DLQ). ``llm-bot memory fact remove|correct`` call
the fact actions here too (``fact_commands.py``, key ``cli``)."""

from __future__ import annotations

from typing import Any

import structlog

from llm_bot.adapters.rabbit_dlq import DlqNotFound, ReplayFailed, ReplayResult
from llm_bot.adapters.redis_user_memory import RedisUserMemory
from llm_bot.bootstrap import recall_index, redis_keys
from llm_bot.entrypoints.dlq_cli import replay_dead_letters
from llm_bot.entrypoints.memory_cli import forget_memory
from llm_bot.entrypoints.memory_transfer import dumped_line, user_record
from llm_bot.errors import ErasedMeanwhile
from llm_bot.inspector.access_keys import Scope
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.fact_edits import FactRemoval
from llm_bot.memory.fact_updates import FactChange

log = structlog.get_logger(__name__)


async def forget_conversation(
    inspector: Inspector, scope: Scope, tenant_id: str, user_id: str, conversation_id: str
) -> int:
    deleted = await forget_memory(inspector.settings, tenant_id, user_id, conversation_id)
    _audit(
        inspector,
        scope,
        "forget_conversation",
        tenant_id=tenant_id,
        user_id=user_id,
        conversation_id=conversation_id,
        deleted=deleted,
    )
    return deleted


async def forget_user(inspector: Inspector, scope: Scope, tenant_id: str, user_id: str) -> int:
    deleted = await forget_memory(inspector.settings, tenant_id, user_id, "*")
    _audit(
        inspector,
        scope,
        "forget_user",
        tenant_id=tenant_id,
        user_id=user_id,
        conversation_id="*",
        deleted=deleted,
    )
    return deleted


async def export_user(inspector: Inspector, scope: Scope, tenant_id: str, user_id: str) -> str:
    """The user's line of ``llm-bot memory export`` (JSON Lines, one line); audited with
    the counts it holds. ``ErasedMeanwhile`` (nothing audited) while the user is erased."""
    settings, client = inspector.settings, inspector.base.redis
    store = RedisUserMemory(client=client, keys=redis_keys(settings.redis))
    record = await user_record(
        store, recall_index(settings, client), tenant_id, user_id, progress=lambda _: None
    )
    if record is None:
        raise ErasedMeanwhile("the user's memory is being erased")
    line = dumped_line(record)
    _audit(
        inspector,
        scope,
        "export_user",
        tenant_id=tenant_id,
        user_id=user_id,
        conversations=len(record["conversations"]),
        index_entries=len(record["index"]["entries"]),
        bytes=len(line.encode()),
    )
    return line


async def remove_fact(
    inspector: Inspector, scope: Scope, tenant_id: str, user_id: str, fact_id: str
) -> FactRemoval:
    """``FactEditRefused`` (nothing done, nothing audited) when it is not a current fact."""
    removed = await inspector.facts.remove(tenant_id, user_id, fact_id)
    _audit(
        inspector,
        scope,
        "remove_fact",
        tenant_id=tenant_id,
        user_id=user_id,
        fact_id=fact_id,
        current_again=[f.id for f in removed.rewritten if f.superseded_by is None],
    )
    return removed


async def correct_fact(
    inspector: Inspector, scope: Scope, tenant_id: str, user_id: str, fact_id: str, *, value: str
) -> FactChange:
    """``FactEditRefused`` (nothing done, nothing audited) for a fact that is not current,
    or a value that is empty, too long or already a current fact."""
    change = await inspector.facts.correct(tenant_id, user_id, fact_id, value)
    _audit(
        inspector,
        scope,
        "correct_fact",
        tenant_id=tenant_id,
        user_id=user_id,
        fact_id=fact_id,
        superseded_by=change.current.id,
    )
    return change


async def replay_dead_letters_by_code(
    inspector: Inspector, scope: Scope, queue: str, code: str
) -> ReplayResult:
    """``llm-bot dlq replay --code CODE --queue QUEUE``: ``DlqNotFound`` or
    ``ReplayFailed`` as there (what was not replayed stays in the DLQ), audited as a failed
    replay with the count replayed before it stopped."""
    try:
        result = await replay_dead_letters(
            inspector.settings.broker, limit=None, code=code, queue=queue
        )
    except (DlqNotFound, ReplayFailed) as exc:
        _audit(
            inspector,
            scope,
            "replay_dead_letters",
            outcome="failed",
            queue=queue,
            code=code,
            replayed=exc.replayed if isinstance(exc, ReplayFailed) else 0,
            error=type(exc).__name__,
        )
        raise
    _audit(
        inspector,
        scope,
        "replay_dead_letters",
        queue=queue,
        code=code,
        replayed=result.replayed,
        left=result.left,
    )
    return result


def _audit(
    inspector: Inspector, scope: Scope, action: str, *, outcome: str = "done", **ids: Any
) -> None:
    """``ids``: ids and counts only, never text."""
    inspector.metrics.actions.labels(action, outcome).inc()
    log.info("inspector.action", action=action, outcome=outcome, key=scope.name, **ids)
