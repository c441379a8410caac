"""The inspector's actions, through the CLI's own code (``llm-bot memory forget``), each
audited: a structlog event naming the action, the key's name and the ids (never any
text), and ``llmbot_inspector_actions_total`` by action."""

from __future__ import annotations

import structlog

from llm_bot.entrypoints.memory_cli import forget_memory
from llm_bot.inspector.access_keys import Scope
from llm_bot.inspector.wiring import Inspector

log = structlog.get_logger(__name__)


async def forget_conversation(
    inspector: Inspector, scope: Scope, tenant_id: str, user_id: str, conversation_id: str
) -> int:
    deleted = await forget_memory(inspector.settings, tenant_id, user_id, conversation_id)
    _audit(
        inspector, scope, "forget_conversation", deleted, ids=(tenant_id, user_id, conversation_id)
    )
    return deleted


async def forget_user(inspector: Inspector, scope: Scope, tenant_id: str, user_id: str) -> int:
    deleted = await forget_memory(inspector.settings, tenant_id, user_id, "*")
    _audit(inspector, scope, "forget_user", deleted, ids=(tenant_id, user_id, "*"))
    return deleted


def _audit(
    inspector: Inspector, scope: Scope, action: str, deleted: int, *, ids: tuple[str, str, str]
) -> None:
    tenant_id, user_id, conversation_id = ids
    inspector.metrics.actions.labels(action).inc()
    log.info(
        "inspector.action",
        action=action,
        key=scope.name,
        tenant_id=tenant_id,
        user_id=user_id,
        conversation_id=conversation_id,
        deleted=deleted,
    )
