"""Erasure of a user's memory (SPEC 5.8): ``memory.forget`` and ``llm-bot memory forget``."""

from __future__ import annotations

from typing import Protocol

import structlog

from llm_bot.memory.working import ConversationKey

log = structlog.get_logger(__name__)


class ErasableStore(Protocol):
    async def forget_user(self, tenant_id: str, user_id: str) -> int: ...

    async def forget_conversation(self, key: ConversationKey) -> int: ...


class Eraser:
    """Erases one user's memory in one tenant (all conversations, or one), and the
    retrieval index entries made from it."""

    def __init__(self, *, store: ErasableStore, index: ErasableStore | None = None) -> None:
        self._store = store
        self._index = index

    async def forget(self, tenant_id: str, user_id: str, conversation_id: str = "*") -> int:
        if conversation_id == "*":
            deleted = await self._store.forget_user(tenant_id, user_id)
            if self._index is not None:
                await self._index.forget_user(tenant_id, user_id)
        else:
            key = ConversationKey(tenant_id, user_id, conversation_id)
            deleted = await self._store.forget_conversation(key)
            if self._index is not None:
                await self._index.forget_conversation(key)
        log.info(
            "memory.forgotten",
            scope="user" if conversation_id == "*" else "conversation",
            deleted_keys=deleted,
        )
        return deleted
