"""The reply path's memory in dicts: the ``MemoryStore`` port (``InMemoryMemoryStore``),
the erasure marks it checks (``InMemoryErasures``) and a fencing lease (``FencedLease``).

``InMemoryMemoryStore`` keeps the contract ``RedisMemoryStore`` keeps, pinned for both by
``tests/support/memory_store_contract.py``: a commit is checked, in the order of the Redis
script, for an erasure since the load, a lease not held, an event already committed and a
version changed since the load, and writes nothing when refused. It lives with the tests,
not the package: the service never runs without Redis, so only tests need it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from llm_bot.errors import ErasedMeanwhile, MemoryConflict
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import MemoryCommit, ProcessedEvent, Recalled, WorkingMemory
from tests.support.in_memory import InMemoryErasures, InMemoryLease, _Recording

MAX_SEQ_PER_TURN = 1000
"""As in the raw trace in Redis: a message's place is ``turn * 1000 + seq``."""


class FencedLease(InMemoryLease):
    """``InMemoryLease`` that knows each key's token while it is held (what a commit's
    fencing compares with: a holder whose lease is gone cannot write)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: dict[ConversationKey, str] = {}

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[str]:
        async with super().hold(key) as token:
            self.tokens[key] = token
            try:
                yield token
            finally:
                del self.tokens[key]


class InMemoryMemoryStore(_Recording):
    """The ``MemoryStore`` port in dicts. ``lease``: whose tokens a commit's ``lease_token``
    must match (none: every commit with a token is fenced, as in Redis with no lease held).
    ``bundles``: each user's long-term bundle, as the memory worker would have left it."""

    def __init__(
        self, *, lease: FencedLease | None = None, erasures: InMemoryErasures | None = None
    ) -> None:
        super().__init__()
        self.lease = lease
        self.erasures = erasures or InMemoryErasures()
        self.memory: dict[ConversationKey, WorkingMemory] = {}
        self.meta: dict[ConversationKey, tuple[int, int]] = {}
        """Conversation → (last turn, version)."""
        self.processed: dict[tuple[str, str, str], ProcessedEvent] = {}
        """(tenant, user, event id) → what the event produced (event ids are the user's)."""
        self.bundles: dict[tuple[str, str], LongTermBundle] = {}
        self.commits: list[MemoryCommit] = []
        """Every accepted commit, in order."""
        self._traces: dict[ConversationKey, dict[str, tuple[int, ChatMessage]]] = {}

    async def load(self, key: ConversationKey, event_id: str) -> Recalled:
        self._enter("load")
        erasure = self.erasures.generation(key.tenant_id, key.user_id)
        turn, version = self.meta.get(key, (0, 0))
        return Recalled(
            memory=self.memory.get(key, WorkingMemory()),
            last_turn=turn,
            version=version,
            processed=self.processed.get((key.tenant_id, key.user_id, event_id)),
            bundle=self.bundles.get((key.tenant_id, key.user_id), LongTermBundle()),
            erasure=erasure,
        )

    async def commit(self, commit: MemoryCommit) -> int:
        self._enter("commit")
        key = commit.key
        if self.erasures.generations.get((key.tenant_id, key.user_id), "") != commit.erasure:
            raise ErasedMeanwhile("memory commit refused: the user was erased meanwhile")
        if commit.lease_token and self._token(key) != commit.lease_token:
            raise MemoryConflict("memory commit refused: fenced")
        event_id = commit.processed.event_id if commit.processed else None
        if event_id is not None and (key.tenant_id, key.user_id, event_id) in self.processed:
            raise MemoryConflict("memory commit refused: duplicate")
        _, version = self.meta.get(key, (0, 0))
        if version != commit.expected_version:
            raise MemoryConflict(f"memory commit refused: conflict (version {version})")
        self.meta[key] = (commit.turn, version + 1)
        self.memory[key] = commit.memory
        trace = self._traces.setdefault(key, {})
        for message in commit.trace:
            trace[message.model_dump_json()] = (_score(message), message)
        if commit.processed is not None and event_id is not None:
            self.processed[(key.tenant_id, key.user_id, event_id)] = commit.processed
        self.commits.append(commit)
        return version + 1

    async def raw_trace(self, key: ConversationKey) -> list[ChatMessage]:
        """Every message of the conversation's raw trace, in turn and sequence order."""
        ordered = sorted(self._traces.get(key, {}).items(), key=lambda item: (item[1][0], item[0]))
        return [message for _, (_, message) in ordered]

    async def forget_conversation(
        self, key: ConversationKey, *, before: float | None = None
    ) -> int:
        """Erase one conversation: its memory, meta, trace and its events' records."""
        self._enter("forget_conversation")
        erasure = self.erasures.begin(key.tenant_id, key.user_id)
        events = {m.event_id for _, m in self._traces.get(key, {}).values() if m.event_id}
        deleted = self._drop(key)
        for event_id in events:
            deleted += self.processed.pop((key.tenant_id, key.user_id, event_id), None) is not None
        self.erasures.end(key.tenant_id, key.user_id, erasure)
        return deleted

    async def forget_user(
        self, tenant_id: str, user_id: str, *, before: float | None = None
    ) -> int:
        """Erase everything of one user (every conversation, every record, the bundle)."""
        self._enter("forget_user")
        erasure = self.erasures.begin(tenant_id, user_id)
        deleted = 0
        for key in {*self.memory, *self.meta, *self._traces}:
            if (key.tenant_id, key.user_id) == (tenant_id, user_id):
                deleted += self._drop(key)
        for record in [r for r in self.processed if r[:2] == (tenant_id, user_id)]:
            deleted += self.processed.pop(record) is not None
        deleted += self.bundles.pop((tenant_id, user_id), None) is not None
        self.erasures.end(tenant_id, user_id, erasure)
        return deleted

    def _drop(self, key: ConversationKey) -> int:
        """Delete the conversation's memory, meta and trace; how many of them existed."""
        found = [self.memory.pop(key, None), self.meta.pop(key, None), self._traces.pop(key, None)]
        return sum(item is not None for item in found)

    def _token(self, key: ConversationKey) -> str | None:
        return self.lease.tokens.get(key) if self.lease is not None else None


def _score(message: ChatMessage) -> int:
    return message.turn * MAX_SEQ_PER_TURN + min(message.seq, MAX_SEQ_PER_TURN - 1)
