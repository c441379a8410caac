"""``InMemoryMemoryStore`` keeps the ``MemoryStore`` contract ``RedisMemoryStore`` keeps
(``tests/support/memory_store_contract.py``), so unit tests of the reply path can stand on
it."""

from __future__ import annotations

import pytest

from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.in_memory import InMemoryErasures
from tests.support.in_memory_store import FencedLease, InMemoryMemoryStore
from tests.support.memory_store_contract import MemoryStoreContract, StoreUnderTest


class TestInMemoryMemoryStore(MemoryStoreContract):
    @pytest.fixture
    def under_test(self) -> StoreUnderTest:
        lease = FencedLease()
        erasures = InMemoryErasures()

        async def begin(tenant_id: str, user_id: str) -> str:
            return erasures.begin(tenant_id, user_id)

        async def end(tenant_id: str, user_id: str, erasure: str) -> None:
            erasures.end(tenant_id, user_id, erasure)

        return StoreUnderTest(
            store=InMemoryMemoryStore(lease=lease, erasures=erasures),
            lease=lease,
            begin_erasure=begin,
            end_erasure=end,
            key=ConversationKey("t1", new_id("u"), new_id("c")),
        )
