"""Ports: the contracts the graph and handlers depend on, named by role.

Adapters implement them by technology (``OpenAIChatModel``, ``RedisMemoryStore``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_edits import FactRemoval
from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
)
from llm_bot.memory.messages import ChatMessage, PromptMessage, ToolCall
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.token_budgets import Period

if TYPE_CHECKING:  # the reply path imports numpy only once it searches
    import numpy as np
    import numpy.typing as npt

    from llm_bot.memory.search_query import SearchQuery
    from llm_bot.memory.vectors import Vector
    from llm_bot.memory.working import (
        ConversationProgress,
        MemoryCommit,
        Recalled,
        WorkingMemory,
    )

ToolSpec = dict[str, Any]
"""A Chat Completions tool definition (``{"type": "function", "function": {...}}``)."""
Matrix: TypeAlias = "npt.NDArray[np.float32]"
"""Rows of unit-length embeddings."""
DeltaSink = Callable[[str], Awaitable[None]]
"""Takes each piece of a streamed reply's text as it arrives."""
EmbeddingPurpose = Literal["query", "passage", "across"]
"""Asymmetric models (e5, bge) embed questions and stored passages differently. ``across``:
a query embedded for the stored texts its ``query`` embedding is not compared with (an
embedder that gives texts of other scripts another model's vectors: the query by that
model; zero rows when there is no such model, or the query's own model reads every
script)."""


@dataclass(frozen=True)
class ModelReply:
    """What the model answered, with the provider-reported usage."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    """Of ``input_tokens``, those the provider served from its prompt cache."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the model asked for (then ``text`` is usually empty)."""


class ChatModel(Protocol):
    """Generates the assistant reply for an assembled context."""

    async def complete(
        self,
        messages: Sequence[PromptMessage],
        *,
        conversation_id: str | None = None,
        cache_key: str | None = None,
        tools: Sequence[ToolSpec] = (),
        on_delta: DeltaSink | None = None,
        model: str | None = None,
    ) -> ModelReply:
        """Raise ``ModelUnavailable``/``ModelTimeout`` (retryable) or ``ModelRejected``.
        ``model``: another model than the configured one (a persona's).
        ``cache_key``: groups requests whose prompts share a prefix (the provider's
        ``prompt_cache_key``, where it takes one). ``tools``: the functions the model may
        call (Chat Completions shape); its calls come back in ``tool_calls``. ``on_delta``:
        stream the reply, handing each text piece to it as it arrives (a failure midway
        raises like any other; the pieces already handed over stay handed over)."""
        ...


class ReplyChannel(Protocol):
    """Sends to an event's ``reply_to`` address: best effort, never persisted, never raises
    (the egress topic has the truth; a requester that went away just misses it)."""

    async def send(
        self, reply_to: str, event_id: str, message: CandidateDeltaV1 | CandidateV1 | ErrorV1
    ) -> None: ...


class StructuredModel(Protocol):
    """Answers with JSON for a schema (the memory worker's summarizer and classifier)."""

    async def complete_json(
        self,
        messages: Sequence[PromptMessage],
        *,
        schema_name: str,
        schema: dict[str, Any],
        conversation_id: str | None = None,
    ) -> ModelReply:
        """Raise like ``ChatModel.complete``; the text may still be junk: validate it."""
        ...


class MemoryStore(Protocol):
    """Loads and commits a conversation's working memory."""

    async def load(self, key: ConversationKey, event_id: str) -> Recalled:
        """Everything ``recall`` needs, in one round trip; raises ``MemoryUnavailable``."""
        ...

    async def commit(self, commit: MemoryCommit) -> int:
        """Write atomically, returning the new version; raises ``MemoryConflict``."""
        ...


class ConversationLease(Protocol):
    """One event of a conversation at a time, across processes."""

    def hold(self, key: ConversationKey) -> AbstractAsyncContextManager[str]:
        """Wait for the lease and keep it while the block runs; yields the fencing token.

        Raises ``ConversationBusy`` after waiting too long, ``MemoryUnavailable`` when the
        store is down (both retryable)."""
        ...

    def renewed(self, key: ConversationKey, token: str) -> AbstractAsyncContextManager[None]:
        """Keep a lease taken elsewhere (with ``token``) renewed while the block runs."""
        ...


class Embedder(Protocol):
    """Turns texts into unit-length dense vectors (SPEC 5.7 embeddings)."""

    @property
    def name(self) -> str:
        """The model's name: vectors of different models are never compared."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        """One row per text; raises ``EmbeddingUnavailable`` (retryable) when the model
        cannot answer."""
        ...

    async def aclose(self) -> None:
        """Release the model's client or threads."""
        ...


class ConversationSchedule(Protocol):
    """Deadlines per conversation, due in time order: a flow's expiry, a tool round's
    timeout (``adapters/redis_schedules.py``; the worker's sweeps read what is due)."""

    async def schedule(self, key: ConversationKey, deadline: float) -> None: ...

    async def unschedule(self, key: ConversationKey) -> None: ...

    async def unschedule_due(self, key: ConversationKey, now: float) -> None: ...

    async def due(self, now: float, limit: int = 100) -> list[ConversationKey]: ...


class RecallIndex(Protocol):
    """One user's retrieval index (SPEC 5.7): entries with embeddings, searched hybrid.

    Every method is scoped to one tenant + user; nothing reads another user's entries.
    """

    async def upsert(
        self,
        tenant_id: str,
        user_id: str,
        entries: Sequence[tuple[IndexEntry, Vector]],
        *,
        model: str,
        erasure: str,
    ) -> int:
        """Add entries, or replace those whose text changed; returns how many were written.
        Each comes with its embedding, or a matrix of them: its own first, then its
        sentences' (``IndexEntry.embedding_texts``); its dense score is their best.
        Refused (``ErasedMeanwhile``) when the user's erasure generation is no longer
        ``erasure``; ``IndexModelMismatch`` when the index holds another model's vectors."""
        ...

    async def digests(self, tenant_id: str, user_id: str, prefix: str) -> dict[str, str]:
        """Entry id → text digest of the entries whose id starts with ``prefix``."""
        ...

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int:
        """Remove entries by id (retention); returns how many existed."""
        ...

    async def lookup(
        self, tenant_id: str, user_id: str, entry_ids: Sequence[str]
    ) -> dict[str, IndexEntry]:
        """The user's entries of these ids that exist (one read: a topic's reused
        selection is kept as ids and read back here, so what was erased drops out)."""
        ...

    async def forget_conversation(self, key: ConversationKey) -> int:
        """Remove the entries of one conversation's messages."""
        ...

    async def forget_user(self, tenant_id: str, user_id: str) -> int:
        """Remove every entry of the user."""
        ...

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        fresh_within: float | None = None,
    ) -> list[SearchHit]:
        """The user's entries relevant to ``query``, best first (``hybrid_search.py``).
        ``fresh_within``: an index that searches a copy in this process waits at most
        that long for the copy to catch up, then searches it as it stands (None: waits)."""
        ...

    def load_progress(self) -> int:
        """How far this process's whole-index loads got: pages read plus loads ended, a
        number that only grows (0 for an engine that searches server-side). A search
        waiting for a load (its user's, or other users' before it) times out only when it
        did not grow within ``LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS``: a load that goes on, however slowly
        a busy process runs it, is waited for; a stuck one is not."""
        ...

    def loaded(self, tenant_id: str, user_id: str) -> bool:
        """Whether this process can search the user's index without loading it first
        (always, for an engine that searches server-side): a search that must load it
        gets ``LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS``."""
        ...

    async def count(self, tenant_id: str, user_id: str) -> int: ...

    async def count_without_vector(self, tenant_id: str, user_id: str, *, model: str) -> int:
        """Entries with no dense vector a query embedded by ``model`` is compared with:
        stored without one, or with another embedding model's (keyword search only, until
        ``llm-bot memory reindex``)."""
        ...

    async def aclose(self) -> None:
        """Release what the index holds of its own (a client; not a shared one)."""
        ...


class MemoryProgress(Protocol):
    """The memory worker's view of a conversation: its progress marks, raw trace and
    activity, and the user's erasure generation. Every write takes the generation read
    before the job read any memory and is refused (``ErasedMeanwhile``) if it changed;
    storage failures are ``MemoryUnavailable`` (retryable)."""

    async def erasure(self, tenant_id: str, user_id: str) -> str:
        """The user's erasure generation; ``ErasedMeanwhile`` while an erasure runs."""
        ...

    async def exists(self, key: ConversationKey) -> bool: ...

    async def load(self, key: ConversationKey) -> ConversationProgress: ...

    async def trace_turns(
        self, key: ConversationKey, first: int, last: int
    ) -> list[ChatMessage]: ...

    async def trace_exists(self, keys: list[ConversationKey]) -> list[bool]: ...

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
        """``MemoryConflict`` if someone compacted meanwhile or the lease is not ours."""
        ...

    async def mark_classified(self, key: ConversationKey, turn: int, *, erasure: str) -> None: ...

    async def mark_indexed(self, key: ConversationKey, turn: int, *, erasure: str) -> None: ...

    async def touch(self, key: ConversationKey, at: float) -> None: ...

    async def idle(
        self, before: float, limit: int = 100
    ) -> list[tuple[ConversationKey, float]]: ...

    async def idle_count(self, before: float) -> int:
        """How many conversations have been idle since before ``before``."""
        ...

    async def clear_activity(self, key: ConversationKey, seen_score: float) -> bool: ...

    async def forget_activity(self, key: ConversationKey) -> None: ...

    async def job_done(self, tenant_id: str, user_id: str, job_id: str) -> bool: ...

    async def mark_job_done(
        self, tenant_id: str, user_id: str, job_id: str, *, erasure: str
    ) -> None: ...


class LongTermStore(Protocol):
    """One user's long-term memory: profile, facts, episodes, notable events."""

    async def profile(self, tenant_id: str, user_id: str) -> dict[str, ProfileAttribute]: ...

    async def facts(self, tenant_id: str, user_id: str) -> list[SemanticFact]: ...

    async def episodes(self, tenant_id: str, user_id: str) -> list[EpisodicSummary]: ...

    async def events(self, tenant_id: str, user_id: str) -> list[NotableEvent]: ...

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
        """Upsert by id, apply retention, rebuild the bundle; refused if erased meanwhile."""
        ...

    async def remove_fact(
        self, tenant_id: str, user_id: str, fact_id: str, *, erasure: str
    ) -> FactRemoval:
        """Remove the current fact ``fact_id`` (``fact_edits.removal``), rebuild the bundle;
        ``FactEditRefused`` when it is not a current fact; refused if erased meanwhile."""
        ...


class TokenLedger(Protocol):
    """Tokens each tenant spent per UTC day and month (``LLM_BOT_TENANT_TOKEN_BUDGETS``);
    storage failures are ``MemoryUnavailable``."""

    async def add(self, tenant_id: str, tokens: int, at: datetime) -> dict[Period, int]:
        """Add a call's tokens; the new totals of the day and the month ``at`` is in."""
        ...

    async def spent(self, tenant_id: str, at: datetime) -> dict[Period, int]: ...


class ModelSpending(Protocol):
    """What a model adapter asks around each call of a tenant's: may it call (raises
    ``BudgetExceeded`` when not), and what the call spent."""

    async def before_call(self) -> None: ...

    async def after_call(self, tokens: int) -> None:
        """Never raises: the call was made, its reply must not be lost."""
        ...
