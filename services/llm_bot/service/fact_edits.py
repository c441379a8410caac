"""An operator removes or corrects one fact (``memory/fact_edits.py`` says what changes).

Each edit holds the user's lease (``compactor.user_scope``, the one compaction holds while
it reads and writes facts: an edit never races a compaction's read-modify-write), writes
under the user's erasure generation, and then brings the retrieval index in line with
long-term memory by the memory worker's own reconciliation (``Indexer.index_long_term``):
a removed or superseded fact leaves the index, with the messages that stated a corrected
value; the correction is embedded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_edits import FactRemoval, correction
from llm_bot.memory.fact_updates import FactChange
from llm_bot.ports import ConversationLease, LongTermStore, MemoryProgress
from llm_bot.service.compactor import user_scope
from llm_bot.service.indexer import Indexer


class FactEditor:
    def __init__(
        self,
        *,
        ltm: LongTermStore,
        progress: MemoryProgress,
        lease: ConversationLease,
        indexer: Indexer | None,
        clock: Callable[[], datetime],
    ) -> None:
        self._ltm = ltm
        self._progress = progress
        self._lease = lease
        self._indexer = indexer
        self._clock = clock

    async def remove(self, tenant_id: str, user_id: str, fact_id: str) -> FactRemoval:
        """Remove the current fact ``fact_id``; ``FactEditRefused`` when there is none."""
        erasure = await self._progress.erasure(tenant_id, user_id)
        async with self._lease.hold(user_scope(ConversationKey(tenant_id, user_id, "*"))):
            removed = await self._ltm.remove_fact(tenant_id, user_id, fact_id, erasure=erasure)
        await self._reindex(tenant_id, user_id, erasure)
        return removed

    async def correct(self, tenant_id: str, user_id: str, fact_id: str, value: str) -> FactChange:
        """Supersede the current fact ``fact_id`` by ``value`` (provenance ``operator``);
        ``FactEditRefused`` when there is no such fact or the value is empty, too long or
        already a current fact."""
        erasure = await self._progress.erasure(tenant_id, user_id)
        async with self._lease.hold(user_scope(ConversationKey(tenant_id, user_id, "*"))):
            facts = await self._ltm.facts(tenant_id, user_id)
            change = correction(facts, fact_id, value, now=self._clock().isoformat())
            await self._ltm.write(tenant_id, user_id, erasure=erasure, facts=change.facts)
        await self._reindex(tenant_id, user_id, erasure)
        return change

    async def _reindex(self, tenant_id: str, user_id: str, erasure: str) -> None:
        if self._indexer is not None:
            await self._indexer.index_long_term(tenant_id, user_id, erasure=erasure)
