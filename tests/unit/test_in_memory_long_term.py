"""``InMemoryLongTermStore`` keeps the ``LongTermStore`` contract ``RedisLongTermStore``
keeps (``tests/support/long_term_contract.py``)."""

from __future__ import annotations

import pytest

from tests.support.events import new_id
from tests.support.in_memory import InMemoryLongTermStore, InMemoryProgress
from tests.support.long_term_contract import LongTermContract, LongTermUnderTest


class TestInMemoryLongTermStore(LongTermContract):
    @pytest.fixture
    def under_test(self) -> LongTermUnderTest:
        progress = InMemoryProgress()

        async def generation(tenant_id: str, user_id: str) -> str:
            return progress.erasures.generation(tenant_id, user_id)

        async def erase(tenant_id: str, user_id: str) -> None:
            progress.erase(tenant_id, user_id)

        return LongTermUnderTest(
            store=InMemoryLongTermStore(progress),
            generation=generation,
            erase=erase,
            tenant="t1",
            user=new_id("u"),
        )
