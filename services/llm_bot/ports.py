"""Ports: the contracts the graph and handlers depend on, named by role.

Adapters implement them by technology (``OpenAIChatModel``, ``RedisMemoryStore``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from llm_bot.memory.working import ConversationKey, MemoryCommit, Recalled

PromptMessage = dict[str, Any]
"""A Chat Completions message (``{"role": ..., "content": ...}``)."""


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
