"""Indexing in the memory worker (SPEC 5.7), off the reply path.

Every recorded message (live or imported) is indexed once, when a memory job of its
conversation runs: the conversation's ``indexed_through`` mark says how far, so a repeated
job embeds nothing twice. Long-term items (facts, episodes, notable events) are reconciled
with the index after a job wrote them: new or changed items are embedded, items gone from
long-term memory (retention, merges, corrections) leave the index, and with a superseded
fact the messages, episodes and notable events that stated its old value
(``stale_statements``; they stay in memory, they are no longer recalled). Entries of
conversations whose raw trace expired leave it when the user's next conversation is
finalized (or the retention sweep visits the user). Every write carries
the user's erasure generation read at the job's start, so nothing erased comes back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import numpy as np
import structlog

from llm_bot.errors import IndexModelMismatch, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import SemanticFact
from llm_bot.memory.recall_items import (
    LONG_TERM_PREFIX,
    MESSAGE_PREFIX,
    IndexEntry,
    LongTermItem,
    changed_long_term_entries,
    conversation_entries,
    conversation_of,
    long_term_entry_id,
    long_term_entry_ids,
    message_entries,
)
from llm_bot.memory.stale_statements import states_replaced_value, still_true
from llm_bot.memory.vectors import Vector
from llm_bot.ports import Embedder, LongTermStore, MemoryProgress, RecallIndex
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

EMBED_BATCH = 32
"""Entries embedded per call, with their sentences (``IndexEntry.embedding_texts``)."""


async def embed_entries(
    embedder: Embedder, entries: Sequence[IndexEntry]
) -> list[tuple[IndexEntry, Vector]]:
    """Each entry with its embeddings, one call for all: a matrix whose first row is the
    entry's own, the others its sentences' (``IndexEntry.embedding_texts``).

    Only what retrieval compares is embedded: an entry of one sentence is embedded whole;
    an entry of several gets its sentences embedded and, as its own embedding, their
    normalised mean (the centroid of what it says) rather than a pass of the model over
    the whole text, which cost more than all its sentences together on long messages
    (a passage of ~200 word pieces: 92 ms of CPU per LongMemEval message, its ~10
    sentences 76 ms). On the LoCoMo development data the dense ranking is as good or
    better (r@10/25/50 0.605/0.725/0.804 with the whole text's embedding, 0.617/0.764/0.816
    with the centroid; docs/benchmarks-notebook.md)."""
    texts = [_embedded_texts(entry) for entry in entries]
    vectors = await embedder.embed([text for own in texts for text in own], purpose="passage")
    ends = np.cumsum([len(own) for own in texts]).tolist()
    return [
        (entry, _with_centroid(vectors[end - len(own) : end]))
        for entry, own, end in zip(entries, texts, ends, strict=True)
    ]


def _embedded_texts(entry: IndexEntry) -> tuple[str, ...]:
    """The entry's text when it is one sentence, else its sentences."""
    texts = entry.embedding_texts
    return texts if len(texts) == 1 else texts[1:]


def _with_centroid(sentences: Vector) -> Vector:
    """One sentence's embedding as it is; several led by their normalised mean."""
    if len(sentences) < 2:  # one embedding: the entry's own
        return sentences
    mean = sentences.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    own = mean / norm if norm > 0 else mean
    return np.vstack([own[None, :], sentences]).astype(np.float32, copy=False)


class Indexer:
    """Keeps one user's retrieval index up to date with their memory."""

    def __init__(
        self,
        *,
        progress: MemoryProgress,
        ltm: LongTermStore,
        index: RecallIndex,
        embedder: Embedder,
        metrics: Metrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._progress = progress
        self._ltm = ltm
        self._index = index
        self._embedder = embedder
        self._metrics = metrics
        self._clock = clock

    async def index_messages(
        self, key: ConversationKey, through: int | None = None, *, erasure: str
    ) -> int:
        """Index the messages of turns after ``indexed_through`` up to ``through`` (the
        conversation's last turn when None); returns the entries written."""
        progress = await self._progress.load(key)
        last = progress.last_turn if through is None else min(through, progress.last_turn)
        first = progress.indexed_through + 1
        if last < first:
            return 0
        # The turn before the first gives its last message as context (neighbour words).
        messages = await self._progress.trace_turns(key, max(1, first - 1), last)
        entries = conversation_entries(
            key.conversation_id, messages, indexed_at=self._clock().timestamp(), first_turn=first
        )
        try:
            written = await self._write(key.tenant_id, key.user_id, entries, erasure=erasure)
        except IndexModelMismatch as exc:
            log.warning("index.model_mismatch", **log_fields(exc))
            return 0
        await self._progress.mark_indexed(key, last, erasure=erasure)
        return written

    async def index_long_term(self, tenant_id: str, user_id: str, *, erasure: str) -> int:
        """Bring the index's long-term entries in line with long-term memory."""
        facts, episodes, events = await asyncio.gather(
            self._ltm.facts(tenant_id, user_id),
            self._ltm.episodes(tenant_id, user_id),
            self._ltm.events(tenant_id, user_id),
        )
        now = self._clock().timestamp()
        true_episodes, true_events = still_true(facts, episodes, events)
        items: list[LongTermItem] = [*facts, *true_episodes, *true_events]
        stored = await self._index.digests(tenant_id, user_id, LONG_TERM_PREFIX)
        wanted, changed = changed_long_term_entries(items, stored, indexed_at=now)
        gone = [entry_id for entry_id in stored if entry_id not in wanted]
        retired = [
            fact
            for fact in facts
            if fact.superseded_by is not None and long_term_entry_id("facts", fact.id) in gone
        ]
        stale = await self._stale_statements(tenant_id, user_id, retired, facts)
        try:
            written = await self._write(tenant_id, user_id, changed, erasure=erasure)
        except IndexModelMismatch as exc:
            log.warning("index.model_mismatch", **log_fields(exc))
            return 0
        removed = await self._index.remove(tenant_id, user_id, [*gone, *stale])
        if written or removed:
            log.info(
                "index.long_term_reconciled", written=written, removed=removed, stale=len(stale)
            )
        return written

    async def _stale_statements(
        self,
        tenant_id: str,
        user_id: str,
        retired: Sequence[SemanticFact],
        facts: Sequence[SemanticFact],
    ) -> list[str]:
        """Entries of the messages that stated what ``retired`` facts said, found in their
        source turns (``states_replaced_value``): once a correction superseded a fact, a
        question about it must not recall the old value next to the new one. Computed once,
        when the superseded fact's own entry leaves the index; the raw trace keeps the
        messages."""
        by_id = {fact.id: fact for fact in facts}
        stale: list[str] = []
        for old in retired:
            new = by_id.get(old.superseded_by or "")
            if new is None:
                continue
            for source in old.sources:
                if not source.turns:
                    continue
                key = ConversationKey(tenant_id, user_id, source.conversation_id)
                turns = set(source.turns)
                messages = await self._progress.trace_turns(key, min(turns), max(turns))
                stale.extend(
                    entry.id
                    for message in messages
                    if message.turn in turns
                    and states_replaced_value(message.content, old.fact, new.fact)
                    for entry in message_entries(source.conversation_id, message, indexed_at=0.0)
                )
        return stale

    async def remove_long_term(
        self, tenant_id: str, user_id: str, removed: Mapping[str, Sequence[str]]
    ) -> int:
        """Remove the entries of long-term items that left memory (kind → ids; profile
        attributes have none)."""
        entries = long_term_entry_ids(removed)
        return await self._index.remove(tenant_id, user_id, entries) if entries else 0

    async def prune_expired(self, tenant_id: str, user_id: str) -> int:
        """Remove the entries of conversations whose raw trace is gone (retention)."""
        stored = await self._index.digests(tenant_id, user_id, MESSAGE_PREFIX)
        by_conversation: dict[str, list[str]] = {}
        for entry_id in stored:
            conversation = conversation_of(entry_id)
            if conversation is not None:
                by_conversation.setdefault(conversation, []).append(entry_id)
        conversations = sorted(by_conversation)
        alive = await self._progress.trace_exists(
            [ConversationKey(tenant_id, user_id, c) for c in conversations]
        )
        gone = [
            entry_id
            for conversation, exists in zip(conversations, alive, strict=True)
            if not exists
            for entry_id in by_conversation[conversation]
        ]
        removed = await self._index.remove(tenant_id, user_id, gone)
        if removed:
            log.info("index.pruned", removed=removed)
        return removed

    async def _write(
        self, tenant_id: str, user_id: str, entries: Sequence[IndexEntry], *, erasure: str
    ) -> int:
        written = 0
        for start in range(0, len(entries), EMBED_BATCH):
            batch = entries[start : start + EMBED_BATCH]
            cpu = time.process_time()
            embedded = await embed_entries(self._embedder, batch)
            self._metrics.index_embed_cpu.observe((time.process_time() - cpu) / len(batch))
            written += await self._index.upsert(
                tenant_id, user_id, embedded, model=self._embedder.name, erasure=erasure
            )
            for entry in batch:
                self._metrics.index_entries.labels(entry.kind).inc()
        return written
