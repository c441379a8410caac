"""Erasure of a user's memory (SPEC 5.8): ``memory.forget`` and ``llm-bot memory forget``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from llm_bot.memory.conversation_erasure import ConversationPruning
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.recall_items import long_term_entry_ids

log = structlog.get_logger(__name__)


class ErasableStore(Protocol):
    """``before``: when the erasure was asked for (Unix seconds), so the user's events made
    until then and processed later are skipped (``Recalled.erased_before``)."""

    async def forget_user(
        self, tenant_id: str, user_id: str, *, before: float | None = None
    ) -> int: ...

    async def forget_conversation(
        self, key: ConversationKey, *, before: float | None = None
    ) -> int: ...


class ErasableIndex(Protocol):
    async def forget_user(self, tenant_id: str, user_id: str) -> int: ...

    async def forget_conversation(self, key: ConversationKey) -> int: ...

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int: ...


class ConversationForgetting(Protocol):
    async def forget_conversation(
        self, tenant_id: str, user_id: str, conversation_id: str
    ) -> ConversationPruning: ...


class Eraser:
    """Erases one user's memory in one tenant (all conversations, or one), and the
    retrieval index entries made from it.

    Forgetting one conversation removes its working memory, raw trace and processed
    records, then what it contributed to long-term memory (``conversation_erasure``) and
    the index entries of both."""

    def __init__(
        self,
        *,
        store: ErasableStore,
        ltm: ConversationForgetting,
        index: ErasableIndex | None = None,
    ) -> None:
        self._store = store
        self._ltm = ltm
        self._index = index

    async def forget(
        self,
        tenant_id: str,
        user_id: str,
        conversation_id: str = "*",
        *,
        asked_at: datetime | None = None,
    ) -> int:
        """Erase; returns the number of keys deleted (plus, for one conversation, the
        long-term items deleted or rewritten). ``asked_at``: when the erasure was asked for
        (the ``memory.forget``'s ``created_at``; default now): the user's events made until
        then that are still waiting or in flight are skipped when they come, not recorded."""
        before = (asked_at or datetime.now(UTC)).timestamp()
        items = 0
        if conversation_id == "*":
            deleted = await self._store.forget_user(tenant_id, user_id, before=before)
            if self._index is not None:
                await self._index.forget_user(tenant_id, user_id)
        else:
            key = ConversationKey(tenant_id, user_id, conversation_id)
            deleted = await self._store.forget_conversation(key, before=before)
            pruned = await self._ltm.forget_conversation(tenant_id, user_id, conversation_id)
            items = pruned.count()
            if self._index is not None:
                await self._index.forget_conversation(key)
                entries = long_term_entry_ids(pruned.deleted)
                await self._index.remove(tenant_id, user_id, entries)
        log.info(
            "memory.forgotten",
            scope="user" if conversation_id == "*" else "conversation",
            deleted_keys=deleted,
            long_term_items=items,
        )
        return deleted + items
