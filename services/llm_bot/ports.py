"""Ports: the contracts the graph and handlers depend on, named by role.

Adapters implement them by technology (``OpenAIChatModel``, ``RedisMemoryStore``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from llm_bot.memory.hybrid_search import SearchQuery, Vector
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.memory.working import ConversationKey, MemoryCommit, Recalled

PromptMessage = dict[str, Any]
"""A Chat Completions message (``{"role": ..., "content": ...}``)."""
Matrix = npt.NDArray[np.float32]
"""Rows of unit-length embeddings."""
EmbeddingPurpose = Literal["query", "passage"]
"""Asymmetric models (e5, bge) embed questions and stored passages differently."""


@dataclass(frozen=True)
class ModelReply:
    """What the model answered, with the provider-reported usage."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int


class ChatModel(Protocol):
    """Generates the assistant reply for an assembled context."""

    async def complete(
        self, messages: Sequence[PromptMessage], *, conversation_id: str | None = None
    ) -> ModelReply:
        """Raise ``ModelUnavailable``/``ModelTimeout`` (retryable) or ``ModelRejected``."""
        ...


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
        Refused (``ErasedMeanwhile``) when the user's erasure generation is no longer
        ``erasure``; ``IndexModelMismatch`` when the index holds another model's vectors."""
        ...

    async def digests(self, tenant_id: str, user_id: str, prefix: str) -> dict[str, str]:
        """Entry id → text digest of the entries whose id starts with ``prefix``."""
        ...

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int:
        """Remove entries by id (retention); returns how many existed."""
        ...

    async def forget_conversation(self, key: ConversationKey) -> int:
        """Remove the entries of one conversation's messages."""
        ...

    async def forget_user(self, tenant_id: str, user_id: str) -> int:
        """Remove every entry of the user."""
        ...

    async def search(
        self, tenant_id: str, user_id: str, query: SearchQuery, *, model: str
    ) -> list[SearchHit]:
        """The user's entries relevant to ``query``, best first (``hybrid_search.py``)."""
        ...

    async def count(self, tenant_id: str, user_id: str) -> int: ...

    async def aclose(self) -> None:
        """Release what the index holds of its own (a client; not a shared one)."""
        ...
