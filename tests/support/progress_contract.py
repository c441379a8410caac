"""The ``MemoryProgress`` contract, one set of tests for every implementation: a test class
subclasses ``ProgressContract`` and gives the ``under_test`` fixture
(``tests/unit/test_in_memory_progress.py``: ``InMemoryProgress``;
``tests/integration/test_redis_progress.py``: ``RedisMemoryProgress`` on the real Redis).

What the memory worker counts on: every write made under an erasure generation read
before an erasure is refused (``ErasedMeanwhile``), and reading the generation while an
erasure runs is refused too; progress marks only rise; a job is marked done once per user;
the idle sweep sees a conversation from its last activity on, most idle first, and a
conversation active again since the sweep saw it is not cleared.

Not pinned here (it needs a conversation written by the reply path's store, which the
in-memory fakes keep apart): ``commit_compaction``'s fencing and ``trace_turns`` of a
written trace; ``tests/integration/test_memory_worker.py`` covers them on Redis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.working import ConversationProgress
from llm_bot.ports import MemoryProgress
from tests.support.events import new_id


@dataclass
class ProgressUnderTest:
    """A progress store (with an activity set of its own), the user's erasure mark, and a
    fresh conversation of a fresh user."""

    progress: MemoryProgress
    begin_erasure: Callable[[str, str], Awaitable[str]]
    end_erasure: Callable[[str, str, str], Awaitable[None]]
    key: ConversationKey

    def conversation(self) -> ConversationKey:
        """Another conversation of the same user."""
        return ConversationKey(self.key.tenant_id, self.key.user_id, new_id("c"))

    async def erase(self) -> None:
        erasure = await self.begin_erasure(self.key.tenant_id, self.key.user_id)
        await self.end_erasure(self.key.tenant_id, self.key.user_id, erasure)


class ProgressContract:
    """The tests every ``MemoryProgress`` passes; subclasses give ``under_test``."""

    @pytest.fixture
    def under_test(self) -> ProgressUnderTest:
        raise NotImplementedError("a contract test class gives its store")

    async def test_an_unknown_conversation_has_no_progress(
        self, under_test: ProgressUnderTest
    ) -> None:
        """Nothing stored: it does not exist, its progress is zero, it has no trace."""
        progress, key = under_test.progress, under_test.key
        assert not await progress.exists(key)
        assert await progress.load(key) == ConversationProgress(None, 0, 0, 0, 0)
        assert await progress.trace_turns(key, 1, 5) == []
        assert await progress.trace_exists([key]) == [False]

    async def test_marks_only_rise(self, under_test: ProgressUnderTest) -> None:
        """A classification or index mark never goes back (a late, older job is harmless)."""
        progress, key = under_test.progress, under_test.key
        erasure = await progress.erasure(key.tenant_id, key.user_id)
        await progress.mark_classified(key, 5, erasure=erasure)
        await progress.mark_classified(key, 3, erasure=erasure)
        await progress.mark_indexed(key, 4, erasure=erasure)
        loaded = await progress.load(key)
        assert (loaded.classified_through, loaded.indexed_through) == (5, 4)

    async def test_a_job_is_done_once_per_user(self, under_test: ProgressUnderTest) -> None:
        """A job marked done is done for its user only."""
        progress, key = under_test.progress, under_test.key
        job = new_id("job")
        assert not await progress.job_done(key.tenant_id, key.user_id, job)
        erasure = await progress.erasure(key.tenant_id, key.user_id)
        await progress.mark_job_done(key.tenant_id, key.user_id, job, erasure=erasure)
        assert await progress.job_done(key.tenant_id, key.user_id, job)
        assert not await progress.job_done(key.tenant_id, new_id("u"), job)

    async def test_writes_read_before_an_erasure_are_refused(
        self, under_test: ProgressUnderTest
    ) -> None:
        """A job that read the generation before an erasure writes nothing after it; one
        that reads it again writes."""
        progress, key = under_test.progress, under_test.key
        before = await progress.erasure(key.tenant_id, key.user_id)
        await under_test.erase()
        with pytest.raises(ErasedMeanwhile):
            await progress.mark_job_done(key.tenant_id, key.user_id, "job_1", erasure=before)
        with pytest.raises(ErasedMeanwhile):
            await progress.mark_classified(key, 2, erasure=before)
        assert not await progress.job_done(key.tenant_id, key.user_id, "job_1")
        after = await progress.erasure(key.tenant_id, key.user_id)
        assert after != before
        await progress.mark_job_done(key.tenant_id, key.user_id, "job_1", erasure=after)

    async def test_the_generation_is_refused_while_an_erasure_runs(
        self, under_test: ProgressUnderTest
    ) -> None:
        """A job starting during an erasure backs off (retryable) instead of reading."""
        key = under_test.key
        erasure = await under_test.begin_erasure(key.tenant_id, key.user_id)
        with pytest.raises(ErasedMeanwhile):
            await under_test.progress.erasure(key.tenant_id, key.user_id)
        await under_test.end_erasure(key.tenant_id, key.user_id, erasure)
        await under_test.progress.erasure(key.tenant_id, key.user_id)

    async def test_the_idle_sweep_sees_the_last_activity_most_idle_first(
        self, under_test: ProgressUnderTest
    ) -> None:
        """Activity only moves later; a conversation idle since ``before`` (inclusive) is
        listed with its last activity, the most idle first, at most ``limit``."""
        progress, first = under_test.progress, under_test.key
        second = under_test.conversation()
        await progress.touch(first, 100.0)
        await progress.touch(first, 50.0)  # an older event, processed late
        await progress.touch(second, 80.0)
        assert await progress.idle(100.0) == [(second, 80.0), (first, 100.0)]
        assert await progress.idle(100.0, limit=1) == [(second, 80.0)]
        assert await progress.idle(99.0) == [(second, 80.0)]
        assert (await progress.idle_count(100.0), await progress.idle_count(79.0)) == (2, 0)

    async def test_a_conversation_active_again_is_not_cleared(
        self, under_test: ProgressUnderTest
    ) -> None:
        """Clearing what the sweep saw drops it, unless it was active again meanwhile;
        forgetting drops it whatever its activity."""
        progress, key = under_test.progress, under_test.key
        await progress.touch(key, 100.0)
        await progress.touch(key, 150.0)  # active again after the sweep read 100
        assert not await progress.clear_activity(key, 100.0)
        assert await progress.idle(200.0) == [(key, 150.0)]
        assert await progress.clear_activity(key, 150.0)
        assert await progress.idle(200.0) == []
        await progress.touch(key, 300.0)
        await progress.forget_activity(key)
        assert await progress.idle_count(400.0) == 0
