"""The ``MemoryStore`` contract, one set of tests for every implementation: a test class
subclasses ``MemoryStoreContract`` and gives the ``under_test`` fixture
(``tests/unit/test_in_memory_store.py``: in dicts; ``tests/integration/
test_redis_memory_store.py``: ``RedisMemoryStore`` on the real Redis).

What the reply path counts on: a load is everything ``recall`` needs; a commit is all or
nothing, and refused (writing nothing) when the user was erased since the load
(``ErasedMeanwhile``), when its lease token is not the lease's (fenced), when its event
was committed already, or when the conversation's version moved since the load (the last
three ``MemoryConflict``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import pytest

from llm_bot.errors import ErasedMeanwhile, MemoryConflict
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.messages import ChatMessage, Role
from llm_bot.memory.working import MemoryCommit, ProcessedEvent, Recalled, WorkingMemory
from llm_bot.ports import ConversationLease, MemoryStore
from tests.support.events import new_id


class TracedStore(MemoryStore, Protocol):
    """A memory store whose raw trace can be read back (both implementations can)."""

    async def raw_trace(self, key: ConversationKey) -> list[ChatMessage]: ...


@dataclass
class StoreUnderTest:
    """A store, the lease its commits are fenced by, the user's erasure mark, and a fresh
    conversation (of a fresh user)."""

    store: TracedStore
    lease: ConversationLease
    begin_erasure: Callable[[str, str], Awaitable[str]]
    end_erasure: Callable[[str, str, str], Awaitable[None]]
    key: ConversationKey

    def other_conversation(self) -> ConversationKey:
        """Another conversation of the same user."""
        return ConversationKey(self.key.tenant_id, self.key.user_id, new_id("c"))

    async def erase(self) -> None:
        """A whole erasure of the user (its start and end)."""
        erasure = await self.begin_erasure(self.key.tenant_id, self.key.user_id)
        await self.end_erasure(self.key.tenant_id, self.key.user_id, erasure)


def message(turn: int, seq: int, role: Role = "user", event_id: str = "e") -> ChatMessage:
    return ChatMessage(
        id=f"{event_id}:{turn}:{seq}",
        role=role,
        content=f"turn {turn} message {seq}",
        created_at="2025-07-30T10:00:00+00:00",
        turn=turn,
        seq=seq,
        event_id=event_id,
    )


def turn_commit(
    recalled: Recalled,
    key: ConversationKey,
    *,
    event_id: str | None = None,
    turn: int | None = None,
    window: tuple[ChatMessage, ...] | None = None,
    lease_token: str | None = None,
    candidate_json: str | None = None,
) -> MemoryCommit:
    """The commit of one event's turn after ``recalled`` (the next turn by default)."""
    event_id = event_id or new_id("evt")
    turn = recalled.last_turn + 1 if turn is None else turn
    added = (message(turn, 0, "user", event_id), message(turn, 1, "assistant", event_id))
    messages = window if window is not None else (*recalled.memory.messages, *added)
    return MemoryCommit(
        key=key,
        expected_version=recalled.version,
        turn=turn,
        memory=WorkingMemory(messages=messages, session={"language": "en"}),
        trace=added,
        processed=ProcessedEvent(event_id=event_id, turn=turn, candidate_json=candidate_json),
        lease_token=lease_token,
        erasure=recalled.erasure,
    )


class MemoryStoreContract:
    """The tests every ``MemoryStore`` passes; subclasses give ``under_test``."""

    @pytest.fixture
    def under_test(self) -> StoreUnderTest:
        raise NotImplementedError("a contract test class gives its store")

    async def test_an_unknown_conversation_loads_empty(self, under_test: StoreUnderTest) -> None:
        """Nothing stored: empty memory, turn and version 0, no record, no bundle."""
        recalled = await under_test.store.load(under_test.key, "evt_x")
        assert recalled.memory == WorkingMemory()
        assert (recalled.last_turn, recalled.version, recalled.processed) == (0, 0, None)
        assert recalled.bundle == LongTermBundle()

    async def test_a_commit_loads_back_with_the_next_version(
        self, under_test: StoreUnderTest
    ) -> None:
        """A commit returns the new version; a load then has its memory, turn and version."""
        store, key = under_test.store, under_test.key
        commit = turn_commit(await store.load(key, "evt_a"), key, event_id="evt_a")
        assert await store.commit(commit) == 1
        recalled = await store.load(key, "evt_b")
        assert recalled.memory == commit.memory
        assert (recalled.last_turn, recalled.version) == (1, 1)
        second = turn_commit(recalled, key)
        assert await store.commit(second) == 2
        assert (await store.load(key, "evt_c")).last_turn == 2

    async def test_a_stale_version_is_refused_and_writes_nothing(
        self, under_test: StoreUnderTest
    ) -> None:
        """Two events that loaded the same version: the second commit is a conflict and
        leaves the first one's memory, trace and records as they were."""
        store, key = under_test.store, under_test.key
        before = await store.load(key, "evt_a")
        first = turn_commit(before, key, event_id="evt_a")
        await store.commit(first)
        with pytest.raises(MemoryConflict):
            await store.commit(turn_commit(before, key, event_id="evt_b"))
        after = await store.load(key, "evt_b")
        assert (after.memory, after.version, after.processed) == (first.memory, 1, None)
        assert await store.raw_trace(key) == list(first.trace)

    async def test_the_processed_record_is_found_by_its_event_only(
        self, under_test: StoreUnderTest
    ) -> None:
        """A redelivered event finds what it produced; another event finds nothing. Event
        ids are the user's: the record is found from any of the user's conversations, never
        from another user's."""
        store, key = under_test.store, under_test.key
        commit = turn_commit(
            await store.load(key, "evt_a"), key, event_id="evt_a", candidate_json='{"x":1}'
        )
        await store.commit(commit)
        assert (await store.load(key, "evt_a")).processed == commit.processed
        assert (await store.load(key, "evt_other")).processed is None
        same_user = await store.load(under_test.other_conversation(), "evt_a")
        assert same_user.processed == commit.processed
        other_user = ConversationKey(key.tenant_id, new_id("u"), key.conversation_id)
        assert (await store.load(other_user, "evt_a")).processed is None

    async def test_an_event_is_committed_once(self, under_test: StoreUnderTest) -> None:
        """The same event committed again, even at the current version, is refused."""
        store, key = under_test.store, under_test.key
        await store.commit(turn_commit(await store.load(key, "evt_a"), key, event_id="evt_a"))
        again = turn_commit(await store.load(key, "evt_a"), key, event_id="evt_a")
        with pytest.raises(MemoryConflict):
            await store.commit(again)
        assert (await store.load(key, "evt_b")).version == 1

    async def test_the_raw_trace_keeps_every_message_in_turn_order(
        self, under_test: StoreUnderTest
    ) -> None:
        """The window may drop turns; the raw trace keeps them all, by turn then seq."""
        store, key = under_test.store, under_test.key
        first = turn_commit(await store.load(key, "e1"), key, event_id="e1")
        await store.commit(first)
        second = turn_commit(await store.load(key, "e2"), key, event_id="e2", window=())
        await store.commit(second)
        assert await store.raw_trace(key) == [*first.trace, *second.trace]
        assert (await store.load(key, "e3")).memory.messages == ()

    async def test_a_commit_without_the_lease_is_fenced(self, under_test: StoreUnderTest) -> None:
        """Only the lease's holder writes: another token, or a lease already let go, is
        refused; the holder's own token commits."""
        store, key = under_test.store, under_test.key
        async with under_test.lease.hold(key) as token:
            recalled = await store.load(key, "evt_a")
            stranger = turn_commit(recalled, key, lease_token=f"not-{token}")
            with pytest.raises(MemoryConflict):
                await store.commit(stranger)
            assert await store.commit(turn_commit(recalled, key, lease_token=token)) == 1
        late = turn_commit(await store.load(key, "evt_b"), key, lease_token=token)
        with pytest.raises(MemoryConflict):
            await store.commit(late)

    async def test_a_commit_after_an_erasure_is_refused(self, under_test: StoreUnderTest) -> None:
        """What was read before an erasure is not written back after it; a new load reads
        the new generation and commits."""
        store, key = under_test.store, under_test.key
        recalled = await store.load(key, "evt_a")
        await under_test.erase()
        with pytest.raises(ErasedMeanwhile):
            await store.commit(turn_commit(recalled, key))
        assert (await store.load(key, "evt_b")).version == 0
        fresh = await store.load(key, "evt_b")
        assert fresh.erasure != recalled.erasure
        assert await store.commit(turn_commit(fresh, key)) == 1

    async def test_a_load_during_an_erasure_is_refused(self, under_test: StoreUnderTest) -> None:
        """While the user's erasure runs, a load raises (retryable) instead of reading."""
        key = under_test.key
        erasure = await under_test.begin_erasure(key.tenant_id, key.user_id)
        with pytest.raises(ErasedMeanwhile):
            await under_test.store.load(key, "evt_a")
        await under_test.end_erasure(key.tenant_id, key.user_id, erasure)
        assert (await under_test.store.load(key, "evt_a")).version == 0

    async def test_conversations_are_kept_apart(self, under_test: StoreUnderTest) -> None:
        """A commit in one conversation changes nothing in the user's others."""
        store, key = under_test.store, under_test.key
        await store.commit(turn_commit(await store.load(key, "evt_a"), key))
        other = under_test.other_conversation()
        recalled = await store.load(other, "evt_a")
        assert (recalled.memory, recalled.version) == (WorkingMemory(), 0)
        assert await store.raw_trace(other) == []
