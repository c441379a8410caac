"""Two conversations of one user compacting at once: the user's facts are read, updated and
written back under the user's lease, so a correction made in one is never undone by a
stale write-back from the other (a lost update).

The race is staged, not left to chance: conversation ``b`` restates "lives in Paris" and
reads the user's facts; conversation ``a``'s summarizer answers only then, with the
correction to Lyon; ``b``'s write waits until ``a`` has written, or until ``a`` is kept out
by the user's lease. With that lease ``b`` writes first and ``a`` corrects what ``b`` wrote;
without it (the control) both read before either writes, and ``b`` writes back the Paris
fact as it read it, current again, next to Lyon.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_updates import FactDecision, apply_fact, is_current
from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
    Source,
)
from llm_bot.memory.messages import ChatMessage, PromptMessage
from llm_bot.memory.working import ConversationProgress, WorkingMemory
from llm_bot.ports import ModelReply
from llm_bot.service.compactor import Compactor, user_scope
from llm_bot.telemetry.metrics import Metrics
from tests.support.in_memory import (
    NO_ERASURE,
    InMemoryLease,
    InMemoryLongTermStore,
    InMemoryProgress,
)

NOW = datetime(2026, 11, 23, tzinfo=UTC)
KEY_A = ConversationKey("t", "u", "a")
KEY_B = ConversationKey("t", "u", "b")

PARIS = apply_fact(
    {},
    FactDecision("The user lives in Paris.", tags=("home",), confidence=0.8),
    salience=0.5,
    source=Source(conversation_id="earlier", turns=(1,)),
    now="2026-10-01T10:00:00+00:00",
).current
LYON = "The user lives in Lyon."

TURNS = {
    "a": [("I moved to Lyon last month.", "Noted: you live in Lyon now.")],
    "b": [("Is your Paris shop still open on Sundays?", "Yes, the Paris shop opens at ten.")],
}
SUMMARIES: dict[str, dict[str, Any]] = {
    "a": {
        "rolling_summary": "The user said they moved from Paris to Lyon.",
        "episode_summary": "The user reported a move to Lyon.",
        "episode_tags": ["move"],
        "salience": 0.7,
        "facts": [
            {
                "fact": LYON,
                "tags": ["home"],
                "confidence": 0.9,
                "action": "update",
                "target": PARIS.id,
            }
        ],
        "profile": [],
    },
    "b": {
        "rolling_summary": "The user asked about the Paris shop's Sunday hours.",
        "episode_summary": "The user asked when the Paris shop opens on Sundays.",
        "episode_tags": ["shop"],
        "salience": 0.4,
        "facts": [
            {
                "fact": PARIS.fact,
                "tags": ["home"],
                "confidence": 0.8,
                "action": "none",
                "target": PARIS.id,
            }
        ],
        "profile": [],
    },
}

_CONVERSATION: ContextVar[str] = ContextVar("conversation", default="setup")
"""The conversation the running compaction belongs to (each runs in its own task)."""


class _Race:
    """The steps both compactions took, in order, and a way to wait for the other's."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.waiting_for_user_lease: set[str] = set()
        self._changed = asyncio.Condition()

    async def record(self, step: str) -> None:
        self.steps.append((step, _CONVERSATION.get()))
        await self._notify()

    async def waiting(self, conversation: str, waits: bool) -> None:
        if waits:
            self.waiting_for_user_lease.add(conversation)
        else:
            self.waiting_for_user_lease.discard(conversation)
        await self._notify()

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(5), self._changed:  # a bound for a broken test, not a wait
            await self._changed.wait_for(done)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def index(self, step: str, conversation: str) -> int:
        """Where ``conversation`` last took ``step``."""
        return max(i for i, taken in enumerate(self.steps) if taken == (step, conversation))


class _Summarizer:
    """Answers each conversation's compaction with its scripted JSON: ``b`` at once, ``a``
    only once ``b`` is writing (so ``b`` has read the user's facts for its write)."""

    def __init__(self, race: _Race) -> None:
        self._race = race
        self.prompts: dict[str, str] = {}

    async def complete_json(
        self,
        messages: Sequence[PromptMessage],
        *,
        schema_name: str,
        schema: dict[str, Any],
        conversation_id: str | None = None,
    ) -> ModelReply:
        assert conversation_id is not None
        self.prompts[conversation_id] = messages[-1]["content"]
        if conversation_id == "a":
            await self._race.until(lambda: ("writing", "b") in self._race.steps)
        text = json.dumps(SUMMARIES[conversation_id])
        return ModelReply(text=text, model="fake-summarizer", input_tokens=0, output_tokens=0)


class _Store(InMemoryLongTermStore):
    """The in-memory store, recording its reads and writes; ``b``'s write waits until ``a``
    has written or is kept waiting for the user's lease."""

    def __init__(self, progress: InMemoryProgress, race: _Race) -> None:
        super().__init__(progress)
        self._race = race

    async def facts(self, tenant_id: str, user_id: str) -> list[SemanticFact]:
        await self._race.record("read")
        return await super().facts(tenant_id, user_id)

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
        await self._race.record("writing")
        if _CONVERSATION.get() == "b":
            race = self._race
            await race.until(
                lambda: ("wrote", "a") in race.steps or "a" in race.waiting_for_user_lease
            )
        written = await super().write(
            tenant_id,
            user_id,
            erasure=erasure,
            profile=profile,
            facts=facts,
            episodes=episodes,
            events=events,
        )
        await self._race.record("wrote")
        return written


class _Lease(InMemoryLease):
    """The in-memory lease, telling ``race`` who waits for the user's lease. Without
    ``user_exclusive`` the user's lease keeps nobody out (as if there were none)."""

    def __init__(self, race: _Race, *, user_exclusive: bool) -> None:
        super().__init__()
        self._race = race
        self._user_exclusive = user_exclusive

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[str]:
        if key != user_scope(key):
            async with super().hold(key) as token:
                yield token
        elif not self._user_exclusive:
            yield "token-shared"
        else:
            conversation = _CONVERSATION.get()
            await self._race.waiting(conversation, True)
            async with super().hold(key) as token:
                await self._race.waiting(conversation, False)
                yield token


def _messages(conversation: str) -> list[ChatMessage]:
    messages = []
    for turn, (question, answer) in enumerate(TURNS[conversation], start=1):
        for seq, (role, content) in enumerate((("user", question), ("assistant", answer))):
            messages.append(
                ChatMessage(
                    id=f"{conversation}-{turn}-{seq}",
                    role=role,
                    content=content,
                    created_at=f"2026-11-22T10:0{turn}:0{seq}+00:00",
                    turn=turn,
                    seq=seq,
                    event_id=f"evt-{conversation}-{turn}",
                )
            )
    return messages


async def _compact_both(*, user_exclusive: bool) -> tuple[dict[str, SemanticFact], _Race]:
    """Both conversations finalized at once, from one stored fact: lives in Paris. Returns
    the user's facts by id afterwards and the steps taken."""
    race = _Race()
    progress = InMemoryProgress()
    store = _Store(progress, race)
    store.items[("t", "u", "facts")][PARIS.id] = PARIS
    for key in (KEY_A, KEY_B):
        messages = _messages(key.conversation_id)
        progress.traces[key] = messages
        last = messages[-1].turn
        progress.add_conversation(
            key, ConversationProgress(WorkingMemory(messages=tuple(messages)), last, 0, last)
        )
    summarizer = _Summarizer(race)
    compactor = Compactor(
        progress=progress,
        ltm=store,
        lease=_Lease(race, user_exclusive=user_exclusive),
        model=summarizer,
        metrics=Metrics(registry=CollectorRegistry()),
        clock=lambda: NOW,
    )

    async def compact(key: ConversationKey) -> tuple[int, ...]:
        _CONVERSATION.set(key.conversation_id)
        return await compactor.compact(key, erasure=NO_ERASURE, token_pressure=False, finalize=True)

    folded = await asyncio.gather(compact(KEY_A), compact(KEY_B))
    assert list(folded) == [(1,), (1,)]
    assert all(progress.progress[key].compacted_through == 1 for key in (KEY_A, KEY_B))
    assert all(PARIS.id in prompt for prompt in summarizer.prompts.values())  # both saw it
    return dict(store.items[("t", "u", "facts")]), race


def _current(facts: dict[str, SemanticFact]) -> list[str]:
    return sorted(f.fact for f in facts.values() if is_current(f))


async def test_a_correction_survives_a_concurrent_restatement_under_the_user_lease() -> None:
    """Under the user's lease the correction to Lyon survives b's restatement of Paris."""
    facts, race = await _compact_both(user_exclusive=True)
    # b read and wrote before a read: the writes were serialized, a saw what b wrote
    assert race.index("read", "b") < race.index("wrote", "b") < race.index("read", "a")
    assert _current(facts) == [LYON]
    (lyon,) = (f for f in facts.values() if f.fact == LYON)
    paris = facts[PARIS.id]
    assert paris.superseded_by == lyon.id
    # b's restatement is not lost either: it merged into Paris before a superseded it
    assert {s.conversation_id for s in paris.sources} == {"earlier", "b"}
    assert [s.conversation_id for s in lyon.sources] == ["a"]


async def test_without_the_user_lease_the_stale_write_back_undoes_the_correction() -> None:
    """Control: without mutual exclusion both read first and b's write undoes the correction."""
    facts, race = await _compact_both(user_exclusive=False)
    # both read the user's facts before either wrote: the race the user's lease prevents
    first_write = min(race.index("wrote", "a"), race.index("wrote", "b"))
    assert max(race.index("read", "a"), race.index("read", "b")) < first_write
    assert race.index("wrote", "a") < race.index("wrote", "b")
    # the lost update: Paris is current again, next to Lyon
    assert _current(facts) == sorted([LYON, PARIS.fact])
    assert facts[PARIS.id].superseded_by is None
