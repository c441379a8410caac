"""The ``FlowCheckpoints`` contract, seen through the ``FlowRunner`` that uses it: a test
class subclasses ``FlowCheckpointsContract`` and gives the ``under_test`` fixture
(``tests/unit/test_in_memory_flow_checkpoints.py``: ``InMemoryFlowCheckpoints``;
``tests/integration/test_redis_flow_checkpoints.py``: ``RedisFlowCheckpoints``).

What the reply path counts on: a conversation without a flow costs one ``exists``; a
started flow is found again by the conversation's next message; a redelivered reply is
applied once; an ended flow's checkpoint stays until ``finish`` (so a redelivery can
publish its result again); a flow advanced across an erasure is dropped and refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.flow_runner import FlowCheckpoints, FlowRunner, FlowStart
from tests.support.events import new_id
from tests.support.in_memory_flows import InMemorySchedule
from tests.support.reply_path import CHECKIN

AT = datetime(2025, 7, 30, 10, 0, tzinfo=UTC)
START = FlowStart("checkin", "checkin")


@dataclass
class CheckpointsUnderTest:
    """Checkpoints, the user's erasure (its generation and a whole erasure), a fresh
    conversation of a fresh user."""

    checkpoints: FlowCheckpoints
    generation: Callable[[str, str], Awaitable[str]]
    erase: Callable[[str, str], Awaitable[None]]
    key: ConversationKey

    def runner(self) -> FlowRunner:
        return FlowRunner(
            flows={"checkin": CHECKIN},
            checkpoints=self.checkpoints,
            schedule=InMemorySchedule(),
            ttl_seconds=600,
        )

    async def current(self) -> str:
        return await self.generation(self.key.tenant_id, self.key.user_id)


class FlowCheckpointsContract:
    """The tests every ``FlowCheckpoints`` passes; subclasses give ``under_test``."""

    @pytest.fixture
    def under_test(self) -> CheckpointsUnderTest:
        raise NotImplementedError("a contract test class gives its checkpoints")

    async def test_a_conversation_without_a_flow(self, under_test: CheckpointsUnderTest) -> None:
        """No checkpoint: nothing exists, no message goes to a flow."""
        runner, key = under_test.runner(), under_test.key
        assert not await under_test.checkpoints.exists(key)
        assert not await runner.takes(key, "evt_1")
        assert await runner.state(key) is None

    async def test_a_started_flow_takes_the_next_message(
        self, under_test: CheckpointsUnderTest
    ) -> None:
        """Started: checkpointed, and the conversation's next message answers it; another
        conversation of the user has no flow."""
        runner, key = under_test.runner(), under_test.key
        turn = await runner.turn(
            key,
            event_id="evt_1",
            text="hi",
            now=AT,
            start=START,
            erasure=await under_test.current(),
        )
        assert "How are you, 1 to 10?" in turn.text
        assert await under_test.checkpoints.exists(key)
        assert await runner.takes(key, "evt_2")
        other = ConversationKey(key.tenant_id, key.user_id, new_id("c"))
        assert not await runner.takes(other, "evt_2")

    async def test_a_reply_is_applied_once_and_an_ended_flow_stays_until_finished(
        self, under_test: CheckpointsUnderTest
    ) -> None:
        """The answer ends the flow; its redelivery replays the same result without
        advancing; the checkpoint stays (the ending event still goes to it) until
        ``finish``."""
        runner, key = under_test.runner(), under_test.key
        erasure = await under_test.current()
        await runner.turn(key, event_id="evt_1", text="hi", now=AT, start=START, erasure=erasure)
        ended = await runner.turn(
            key, event_id="evt_2", text="7", now=AT, start=None, erasure=erasure
        )
        assert ended.result is not None
        assert (ended.result.status, ended.replayed) == ("completed", False)
        again = await runner.turn(
            key, event_id="evt_2", text="7", now=AT, start=None, erasure=erasure
        )
        assert (again.result, again.replayed) == (ended.result, True)
        assert await runner.takes(key, "evt_2")
        assert not await runner.takes(key, "evt_3")
        assert await runner.holds(key, ended.result.id)
        await runner.finish(key, ended.result.id)
        assert not await under_test.checkpoints.exists(key)
        assert not await runner.holds(key, ended.result.id)

    async def test_a_flow_advanced_across_an_erasure_is_dropped(
        self, under_test: CheckpointsUnderTest
    ) -> None:
        """The user was erased after ``recall`` read the generation: the turn is refused
        and its checkpoint deleted (nothing of the erased user stays)."""
        runner, key = under_test.runner(), under_test.key
        before = await under_test.current()
        await under_test.erase(key.tenant_id, key.user_id)
        with pytest.raises(ErasedMeanwhile):
            await runner.turn(key, event_id="evt_1", text="hi", now=AT, start=START, erasure=before)
        assert not await under_test.checkpoints.exists(key)
