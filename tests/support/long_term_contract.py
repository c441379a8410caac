"""The ``LongTermStore`` contract, one set of tests for every implementation: a test class
subclasses ``LongTermContract`` and gives the ``under_test`` fixture
(``tests/unit/test_in_memory_long_term.py``: ``InMemoryLongTermStore``;
``tests/integration/test_redis_long_term.py``: ``RedisLongTermStore`` on the real Redis).

What the worker and the inspector count on: items are upserted by id (profile attributes
by key) and read back per user; a write or a removal under an erasure generation read
before an erasure is refused and writes nothing; only a current fact can be removed.
Retention and the bundle are the Redis store's own (``test_long_term_retention.py``): the
items here are recent and few, so no policy evicts them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.fact_edits import FactEditRefused
from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
    Source,
)
from llm_bot.ports import LongTermStore
from tests.support.events import new_id


@dataclass
class LongTermUnderTest:
    """A long-term store, the user's erasure mark (read and erased), a fresh user."""

    store: LongTermStore
    generation: Callable[[str, str], Awaitable[str]]
    erase: Callable[[str, str], Awaitable[None]]
    tenant: str
    user: str

    async def current(self) -> str:
        return await self.generation(self.tenant, self.user)


def now() -> str:
    return datetime.now(UTC).isoformat()


def fact(fact_id: str, text: str, *, superseded_by: str | None = None) -> SemanticFact:
    return SemanticFact(
        id=fact_id,
        fact=text,
        confidence=0.9,
        salience=0.5,
        sources=(Source(conversation_id="c1", turns=(1,)),),
        created_at=now(),
        updated_at=now(),
        superseded_by=superseded_by,
        superseded_at=now() if superseded_by else None,
    )


def episode(episode_id: str) -> EpisodicSummary:
    return EpisodicSummary(
        id=episode_id,
        conversation_id="c1",
        turns=(1, 2),
        summary="They planned a trip.",
        salience=0.4,
        created_at=now(),
    )


def event(event_id: str) -> NotableEvent:
    return NotableEvent(
        id=event_id,
        event_type="INFORMATION",
        importance=0.8,
        summary="They moved to Lisbon.",
        conversation_id="c1",
        turn=2,
        event_id="evt_1",
        created_at=now(),
    )


class LongTermContract:
    """The tests every ``LongTermStore`` passes; subclasses give ``under_test``."""

    @pytest.fixture
    def under_test(self) -> LongTermUnderTest:
        raise NotImplementedError("a contract test class gives its store")

    async def test_a_new_user_has_no_long_term_memory(self, under_test: LongTermUnderTest) -> None:
        """Nothing written: every kind is empty."""
        store, tenant, user = under_test.store, under_test.tenant, under_test.user
        assert await store.profile(tenant, user) == {}
        assert await store.facts(tenant, user) == []
        assert await store.episodes(tenant, user) == []
        assert await store.events(tenant, user) == []

    async def test_items_are_upserted_by_id_and_read_back(
        self, under_test: LongTermUnderTest
    ) -> None:
        """A write returns how many items it wrote; the same id again replaces the item;
        profile attributes are keyed by their key."""
        store, tenant, user = under_test.store, under_test.tenant, under_test.user
        city = ProfileAttribute(key="city", value="Porto", updated_at=now())
        written = await store.write(
            tenant,
            user,
            erasure=await under_test.current(),
            profile=[city],
            facts=[fact("f1", "likes tea")],
            episodes=[episode("ep1")],
            events=[event("ne1")],
        )
        assert written == 4
        moved = ProfileAttribute(key="city", value="Lisbon", updated_at=now())
        await store.write(
            tenant,
            user,
            erasure=await under_test.current(),
            profile=[moved],
            facts=[fact("f1", "likes green tea"), fact("f2", "owns a cat")],
        )
        assert await store.profile(tenant, user) == {"city": moved}
        facts = sorted(await store.facts(tenant, user), key=lambda f: f.id)
        assert [(f.id, f.fact) for f in facts] == [("f1", "likes green tea"), ("f2", "owns a cat")]
        assert [e.id for e in await store.episodes(tenant, user)] == ["ep1"]
        assert [e.id for e in await store.events(tenant, user)] == ["ne1"]

    async def test_users_are_kept_apart(self, under_test: LongTermUnderTest) -> None:
        """One user's items are never another's."""
        store, tenant, user = under_test.store, under_test.tenant, under_test.user
        await store.write(tenant, user, erasure=await under_test.current(), facts=[fact("f1", "x")])
        assert await store.facts(tenant, new_id("u")) == []
        assert await store.facts(new_id("t"), user) == []

    async def test_a_write_read_before_an_erasure_is_refused(
        self, under_test: LongTermUnderTest
    ) -> None:
        """A job that read the generation before an erasure writes nothing after it."""
        store, tenant, user = under_test.store, under_test.tenant, under_test.user
        before = await under_test.current()
        await under_test.erase(tenant, user)
        with pytest.raises(ErasedMeanwhile):
            await store.write(tenant, user, erasure=before, facts=[fact("f1", "likes tea")])
        assert await store.facts(tenant, user) == []
        await store.write(tenant, user, erasure=await under_test.current(), facts=[fact("f1", "t")])
        assert len(await store.facts(tenant, user)) == 1

    async def test_only_a_current_fact_is_removed(self, under_test: LongTermUnderTest) -> None:
        """Removing a current fact deletes it; a superseded or unknown one is refused;
        after an erasure the removal is refused too."""
        store, tenant, user = under_test.store, under_test.tenant, under_test.user
        erasure = await under_test.current()
        old, new = fact("f1", "lives in Porto", superseded_by="f2"), fact("f2", "lives in Lisbon")
        await store.write(tenant, user, erasure=erasure, facts=[old, new, fact("f3", "cat")])
        with pytest.raises(FactEditRefused):
            await store.remove_fact(tenant, user, "f1", erasure=erasure)
        with pytest.raises(FactEditRefused):
            await store.remove_fact(tenant, user, "nope", erasure=erasure)
        removed = await store.remove_fact(tenant, user, "f3", erasure=erasure)
        assert removed.deleted == ("f3",)
        assert sorted(f.id for f in await store.facts(tenant, user)) == ["f1", "f2"]
        await under_test.erase(tenant, user)
        with pytest.raises(ErasedMeanwhile):
            await store.remove_fact(tenant, user, "f2", erasure=erasure)
