"""The ``RecallIndex`` port in memory: one ``IndexSnapshot`` per user (the structure
``RedisRecallIndex`` keeps as its per-process copy), searched by ``hybrid_search.search``.

It passes the contract ``RedisRecallIndex`` and ``QdrantRecallIndex`` pass
(``tests/integration/test_recall_index_contract.py``, where it reads the erasure mark from
Redis as they do); unit tests give it an ``InMemoryErasures`` instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from llm_bot.errors import ErasedMeanwhile, IndexModelMismatch
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.recall_items import IndexEntry, SearchHit, conversation_prefix
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector
from tests.support.in_memory import InMemoryErasures

Generation = Callable[[str, str], Awaitable[str]]
"""The user's erasure generation now (raises ``ErasedMeanwhile`` during an erasure)."""


@dataclass
class _UserIndex:
    model: str
    snapshot: IndexSnapshot = field(default_factory=IndexSnapshot)
    digests: dict[str, str] = field(default_factory=dict)
    without_vector: set[str] = field(default_factory=set)


class InMemoryRecallIndex:
    """The ``RecallIndex`` port in dicts, one snapshot per tenant + user."""

    def __init__(self, generation: Generation) -> None:
        self._generation = generation
        self._users: dict[tuple[str, str], _UserIndex] = {}

    @classmethod
    def on(cls, erasures: InMemoryErasures) -> InMemoryRecallIndex:
        """An index whose writes are checked against ``erasures``."""

        async def generation(tenant_id: str, user_id: str) -> str:
            return erasures.generation(tenant_id, user_id)

        return cls(generation)

    async def upsert(
        self,
        tenant_id: str,
        user_id: str,
        entries: Sequence[tuple[IndexEntry, Vector]],
        *,
        model: str,
        erasure: str,
    ) -> int:
        if not entries:
            return 0
        try:
            unchanged = await self._generation(tenant_id, user_id) == erasure
        except ErasedMeanwhile:
            unchanged = False
        if not unchanged:
            raise ErasedMeanwhile("index write refused: the user was erased meanwhile")
        user = self._users.setdefault((tenant_id, user_id), _UserIndex(model))
        if user.model != model:
            raise IndexModelMismatch("the user's index holds another embedding model's vectors")
        changed = [(e, v) for e, v in entries if user.digests.get(e.id) != e.digest]
        user.snapshot.upsert(changed)
        for entry, vectors in changed:
            user.digests[entry.id] = entry.digest
            if np.asarray(vectors).size == 0:
                user.without_vector.add(entry.id)
            else:
                user.without_vector.discard(entry.id)
        return len(changed)

    async def digests(self, tenant_id: str, user_id: str, prefix: str) -> dict[str, str]:
        user = self._users.get((tenant_id, user_id))
        digests = user.digests if user is not None else {}
        return {entry_id: d for entry_id, d in digests.items() if entry_id.startswith(prefix)}

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int:
        user = self._users.get((tenant_id, user_id))
        if user is None:
            return 0
        for entry_id in entry_ids:
            user.digests.pop(entry_id, None)
            user.without_vector.discard(entry_id)
        return user.snapshot.remove(entry_ids)

    async def lookup(
        self, tenant_id: str, user_id: str, entry_ids: Sequence[str]
    ) -> dict[str, IndexEntry]:
        user = self._users.get((tenant_id, user_id))
        found = [user.snapshot.get(i) for i in entry_ids] if user is not None else []
        return {entry.id: entry for entry in found if entry is not None}

    async def forget_conversation(self, key: ConversationKey) -> int:
        prefix = conversation_prefix(key.conversation_id)
        ids = await self.digests(key.tenant_id, key.user_id, prefix)
        return await self.remove(key.tenant_id, key.user_id, list(ids))

    async def forget_user(self, tenant_id: str, user_id: str) -> int:
        user = self._users.pop((tenant_id, user_id), None)
        return len(user.digests) if user is not None else 0

    def load_progress(self) -> int:
        return 0

    def loaded(self, tenant_id: str, user_id: str) -> bool:
        return True

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        fresh_within: float | None = None,  # no copy in this process
    ) -> list[SearchHit]:
        """Vectors of another model are not compared: keyword search only."""
        user = self._users.get((tenant_id, user_id))
        if user is None:
            return []
        if user.model != model and query.vector is not None:
            query = replace(query, vector=None)  # every other bound and filter kept
        return search(user.snapshot, query)

    async def count(self, tenant_id: str, user_id: str) -> int:
        user = self._users.get((tenant_id, user_id))
        return len(user.digests) if user is not None else 0

    async def count_without_vector(self, tenant_id: str, user_id: str, *, model: str) -> int:
        user = self._users.get((tenant_id, user_id))
        if user is None:
            return 0
        return len(user.digests) if user.model != model else len(user.without_vector)

    async def aclose(self) -> None:
        """Nothing to release."""
