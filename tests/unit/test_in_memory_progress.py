"""``InMemoryProgress`` keeps the ``MemoryProgress`` contract ``RedisMemoryProgress`` keeps
(``tests/support/progress_contract.py``), so the worker's unit tests stand on it."""

from __future__ import annotations

import pytest

from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.in_memory import InMemoryErasures, InMemoryProgress
from tests.support.progress_contract import ProgressContract, ProgressUnderTest


class TestInMemoryProgress(ProgressContract):
    @pytest.fixture
    def under_test(self) -> ProgressUnderTest:
        erasures = InMemoryErasures()

        async def begin(tenant_id: str, user_id: str) -> str:
            return erasures.begin(tenant_id, user_id)

        async def end(tenant_id: str, user_id: str, erasure: str) -> None:
            erasures.end(tenant_id, user_id, erasure)

        return ProgressUnderTest(
            progress=InMemoryProgress(erasures),
            begin_erasure=begin,
            end_erasure=end,
            key=ConversationKey("t1", new_id("u"), new_id("c")),
        )
