"""In-memory implementations of the worker's ports (``llm_bot.ports``), for unit tests of
the orchestration that run with no services. They keep the contracts that matter to the
callers (erasure generations refuse writes, job markers, activity; ``InMemoryProgress``
passes ``tests/support/progress_contract.py`` as ``RedisMemoryProgress`` does) and record
calls; ``fail`` makes a named method raise a given error on its next calls."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_edits import FactRemoval, removal
from llm_bot.memory.long_term import EpisodicSummary, NotableEvent, ProfileAttribute, SemanticFact
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import ConversationProgress, WorkingMemory

NO_ERASURE = ""
"""The generation of a user never erased (as ``adapters/redis_erasure.py`` reads it)."""


class _Recording:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._failures: dict[str, list[Exception]] = defaultdict(list)

    def fail(self, method: str, *errors: Exception) -> None:
        """The next ``len(errors)`` calls of ``method`` raise these errors, in order."""
        self._failures[method].extend(errors)

    def _enter(self, method: str) -> None:
        self.calls[method] += 1
        if self._failures[method]:
            raise self._failures[method].pop(0)


class InMemoryErasures:
    """Users' erasure generations (``adapters/redis_erasure.py`` without Redis): a new
    generation at every erasure's start and end; readers are refused while one runs."""

    def __init__(self) -> None:
        self.generations: dict[tuple[str, str], str] = {}
        self.active: Counter[tuple[str, str]] = Counter()
        self._ids = itertools.count(1)

    def generation(self, tenant_id: str, user_id: str) -> str:
        """The generation to write under; ``ErasedMeanwhile`` while an erasure runs."""
        if self.active[(tenant_id, user_id)]:
            raise ErasedMeanwhile("the user's memory is being erased")
        return self.generations.get((tenant_id, user_id), "")

    def begin(self, tenant_id: str, user_id: str) -> str:
        """Mark an erasure of the user active; returns its id."""
        self.active[(tenant_id, user_id)] += 1
        self._next(tenant_id, user_id)
        return str(next(self._ids))

    def end(self, tenant_id: str, user_id: str, erasure: str) -> None:
        """The erasure ``erasure`` is over (a new generation either way)."""
        self.active[(tenant_id, user_id)] -= 1
        self._next(tenant_id, user_id)

    def erase(self, tenant_id: str, user_id: str) -> None:
        """A whole erasure: every earlier reader's writes are refused."""
        self.end(tenant_id, user_id, self.begin(tenant_id, user_id))

    def _next(self, tenant_id: str, user_id: str) -> None:
        self.generations[(tenant_id, user_id)] = f"gen-{next(self._ids)}"


class InMemoryProgress(_Recording):
    def __init__(self, erasures: InMemoryErasures | None = None) -> None:
        super().__init__()
        self.erasures = erasures or InMemoryErasures()
        self.generations = self.erasures.generations
        self.progress: dict[ConversationKey, ConversationProgress] = {}
        self.traces: dict[ConversationKey, list[ChatMessage]] = defaultdict(list)
        self.activity: dict[ConversationKey, float] = {}
        self.done_jobs: set[tuple[str, str, str]] = set()

    def add_conversation(self, key: ConversationKey, progress: ConversationProgress) -> None:
        self.progress[key] = progress
        self.activity[key] = 0.0

    def erase(self, tenant_id: str, user_id: str) -> None:
        """What an erasure does to the generation: every earlier reader is refused."""
        self.erasures.erase(tenant_id, user_id)

    def _check(self, tenant_id: str, user_id: str, erasure: str) -> None:
        if self.generations.get((tenant_id, user_id), NO_ERASURE) != erasure:
            raise ErasedMeanwhile("refused: the user was erased meanwhile")

    async def erasure(self, tenant_id: str, user_id: str) -> str:
        self._enter("erasure")
        return self.erasures.generation(tenant_id, user_id)

    async def exists(self, key: ConversationKey) -> bool:
        self._enter("exists")
        return key in self.progress

    async def load(self, key: ConversationKey) -> ConversationProgress:
        self._enter("load")
        return self.progress.get(key, ConversationProgress(None, 0, 0, 0))

    async def trace_turns(self, key: ConversationKey, first: int, last: int) -> list[ChatMessage]:
        self._enter("trace_turns")
        return [m for m in self.traces[key] if first <= m.turn <= last]

    async def trace_exists(self, keys: list[ConversationKey]) -> list[bool]:
        self._enter("trace_exists")
        return [bool(self.traces.get(key)) for key in keys]

    async def commit_compaction(
        self,
        key: ConversationKey,
        *,
        erasure: str,
        lease_token: str,
        expected_compacted_through: int,
        compacted_through: int,
        memory: WorkingMemory | None,
    ) -> None:
        self._enter("commit_compaction")
        self._check(key.tenant_id, key.user_id, erasure)
        old = self.progress[key]
        self.progress[key] = ConversationProgress(
            memory, old.last_turn, compacted_through, old.classified_through, old.indexed_through
        )

    async def mark_classified(self, key: ConversationKey, turn: int, *, erasure: str) -> None:
        self._enter("mark_classified")
        self._check(key.tenant_id, key.user_id, erasure)
        old = self.progress.get(key, ConversationProgress(None, 0, 0, 0))
        classified = max(turn, old.classified_through)  # marks only rise
        self.progress[key] = ConversationProgress(
            old.memory, old.last_turn, old.compacted_through, classified, old.indexed_through
        )

    async def mark_indexed(self, key: ConversationKey, turn: int, *, erasure: str) -> None:
        self._enter("mark_indexed")
        self._check(key.tenant_id, key.user_id, erasure)
        old = self.progress.get(key, ConversationProgress(None, 0, 0, 0))
        indexed = max(turn, old.indexed_through)
        self.progress[key] = ConversationProgress(
            old.memory, old.last_turn, old.compacted_through, old.classified_through, indexed
        )

    async def touch(self, key: ConversationKey, at: float) -> None:
        self._enter("touch")
        self.activity[key] = max(at, self.activity.get(key, 0.0))

    async def idle(self, before: float, limit: int = 100) -> list[tuple[ConversationKey, float]]:
        self._enter("idle")
        due = sorted(((k, at) for k, at in self.activity.items() if at <= before), key=_score)
        return due[:limit]

    async def idle_count(self, before: float) -> int:
        self._enter("idle_count")
        return sum(1 for at in self.activity.values() if at <= before)

    async def clear_activity(self, key: ConversationKey, seen_score: float) -> bool:
        self._enter("clear_activity")
        if self.activity.get(key, float("inf")) <= seen_score:
            del self.activity[key]
            return True
        return False

    async def forget_activity(self, key: ConversationKey) -> None:
        self._enter("forget_activity")
        self.activity.pop(key, None)

    async def job_done(self, tenant_id: str, user_id: str, job_id: str) -> bool:
        self._enter("job_done")
        return (tenant_id, user_id, job_id) in self.done_jobs

    async def mark_job_done(
        self, tenant_id: str, user_id: str, job_id: str, *, erasure: str
    ) -> None:
        self._enter("mark_job_done")
        self._check(tenant_id, user_id, erasure)
        self.done_jobs.add((tenant_id, user_id, job_id))


def _score(row: tuple[ConversationKey, float]) -> float:
    return row[1]


class InMemoryLongTermStore(_Recording):
    def __init__(self, progress: InMemoryProgress) -> None:
        super().__init__()
        self._progress = progress
        self.items: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(dict)

    async def profile(self, tenant_id: str, user_id: str) -> dict[str, ProfileAttribute]:
        self._enter("profile")
        return dict(self.items[(tenant_id, user_id, "profile")])

    async def facts(self, tenant_id: str, user_id: str) -> list[SemanticFact]:
        self._enter("facts")
        return list(self.items[(tenant_id, user_id, "facts")].values())

    async def episodes(self, tenant_id: str, user_id: str) -> list[EpisodicSummary]:
        self._enter("episodes")
        return list(self.items[(tenant_id, user_id, "episodes")].values())

    async def events(self, tenant_id: str, user_id: str) -> list[NotableEvent]:
        self._enter("events")
        return list(self.items[(tenant_id, user_id, "events")].values())

    async def write(
        self,
        tenant_id: str,
        user_id: str,
        *,
        erasure: str,
        profile: Iterable[ProfileAttribute] = (),
        facts: Iterable[SemanticFact] = (),
        episodes: Iterable[EpisodicSummary] = (),
        events: Iterable[NotableEvent] = (),
    ) -> int:
        self._enter("write")
        self._progress._check(tenant_id, user_id, erasure)  # one fake system
        written = 0
        for kind, items in (("facts", facts), ("episodes", episodes), ("events", events)):
            for item in items:
                self.items[(tenant_id, user_id, kind)][item.id] = item
                written += 1
        for attribute in profile:
            self.items[(tenant_id, user_id, "profile")][attribute.key] = attribute
            written += 1
        return written

    async def remove_fact(
        self, tenant_id: str, user_id: str, fact_id: str, *, erasure: str
    ) -> FactRemoval:
        self._enter("remove_fact")
        self._progress._check(tenant_id, user_id, erasure)
        facts = self.items[(tenant_id, user_id, "facts")]
        done = removal(facts.values(), fact_id)
        for gone in done.deleted:
            del facts[gone]
        for fact in done.rewritten:
            facts[fact.id] = fact
        return done


class InMemoryLease:
    """One holder per key at a time in this process (the lease's contract, minus Redis):
    an ``asyncio.Lock`` per key, taken in arrival order (FIFO), never re-entrant. ``held``
    counts the holds of each key; the fencing token is ``token-<that count>``."""

    def __init__(self) -> None:
        self.held: Counter[ConversationKey] = Counter()
        self._locks: defaultdict[ConversationKey, asyncio.Lock] = defaultdict(asyncio.Lock)

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[str]:
        async with self._locks[key]:
            self.held[key] += 1
            yield f"token-{self.held[key]}"

    @asynccontextmanager
    async def renewed(self, key: ConversationKey, token: str) -> AsyncIterator[None]:
        """Nothing to renew: an in-memory lease never expires."""
        yield
