"""``InMemoryFlowCheckpoints`` keeps the ``FlowCheckpoints`` contract
``RedisFlowCheckpoints`` keeps (``tests/support/flow_checkpoints_contract.py``)."""

from __future__ import annotations

import pytest

from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.flow_checkpoints_contract import CheckpointsUnderTest, FlowCheckpointsContract
from tests.support.in_memory import InMemoryErasures
from tests.support.in_memory_flows import InMemoryFlowCheckpoints


class TestInMemoryFlowCheckpoints(FlowCheckpointsContract):
    @pytest.fixture
    def under_test(self) -> CheckpointsUnderTest:
        erasures = InMemoryErasures()

        async def generation(tenant_id: str, user_id: str) -> str:
            return erasures.generation(tenant_id, user_id)

        async def erase(tenant_id: str, user_id: str) -> None:
            erasures.erase(tenant_id, user_id)

        return CheckpointsUnderTest(
            checkpoints=InMemoryFlowCheckpoints(erasures),
            generation=generation,
            erase=erase,
            key=ConversationKey("t1", new_id("u"), new_id("c")),
        )
