"""Compaction and finalization in the memory worker (SPEC 5.4, 5.6), off the reply path.

The summarizer call runs without the conversation's lease (a reply never waits for it);
the lease is taken only for the short write: it checks that nobody compacted meanwhile,
writes the long-term items (idempotent: stable ids, restatements merge, corrections
supersede: ``fact_updates``) and commits the
working memory with ``compacted_through`` (fenced by the lease token). A failure anywhere
leaves the turns pending for the retry, never lost and never folded twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from llm_bot.errors import MemoryConflict, RetryableError
from llm_bot.memory.compaction import (
    MAX_TURNS_PER_BATCH,
    SummarizerOutput,
    apply_compaction,
    parse_summarizer_output,
    summarizer_json_schema,
    summarizer_messages,
    turns_to_compact,
)
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_updates import apply_facts, related_facts
from llm_bot.memory.long_term import EpisodicSummary, ProfileAttribute, Source, stable_id
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import WorkingMemory
from llm_bot.ports import ConversationLease, LongTermStore, MemoryProgress, StructuredModel
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

MAX_BATCHES_PER_JOB = 8
"""A job folds at most this many batches; a later job (or the retry) continues."""


def user_scope(key: ConversationKey) -> ConversationKey:
    """The user's own lease: conversation ``*`` (as a ``memory.forget`` of every
    conversation names it), held for writes to the user's long-term memory. Always taken
    inside a conversation's lease, never around one: no deadlock."""
    return ConversationKey(key.tenant_id, key.user_id, "*")


class SummarizerFailed(RetryableError):
    """The summarizer returned junk: the turns stay pending and are retried."""

    code = "model_error"


class Compactor:
    """Folds turns that left the window into the rolling summary and long-term memory."""

    def __init__(
        self,
        *,
        progress: MemoryProgress,
        ltm: LongTermStore,
        lease: ConversationLease,
        model: StructuredModel,
        metrics: Metrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._progress = progress
        self._ltm = ltm
        self._lease = lease
        self._model = model
        self._metrics = metrics
        self._clock = clock

    async def compact(
        self,
        key: ConversationKey,
        *,
        erasure: str,
        token_pressure: bool,
        finalize: bool = False,
    ) -> tuple[int, ...]:
        """Compact what is due, in batches of at most ``MAX_TURNS_PER_BATCH`` turns (each
        its own summarizer request and commit); on ``finalize`` everything, then drop the
        working memory. Returns the turns folded (empty: nothing to do, a no-op).
        ``erasure``: the user's erasure counter as read before any read of their memory;
        every write is refused (``ErasedMeanwhile``) if the user was erased since."""
        folded: list[int] = []
        for _ in range(MAX_BATCHES_PER_JOB):
            turns, done = await self._compact_batch(
                key, erasure=erasure, token_pressure=token_pressure, finalize=finalize
            )
            folded.extend(turns)
            if done:
                break
        return tuple(folded)

    async def _compact_batch(
        self, key: ConversationKey, *, erasure: str, token_pressure: bool, finalize: bool
    ) -> tuple[tuple[int, ...], bool]:
        """One batch; returns its turns and whether nothing more is due."""
        before = await self._progress.load(key)
        memory = before.memory or WorkingMemory()
        turns = turns_to_compact(
            memory,
            last_turn=before.last_turn,
            compacted_through=before.compacted_through,
            token_pressure=token_pressure,
            finalize=finalize,
        )
        finishing = finalize and (not turns or turns[-1] == before.last_turn)
        if not turns and not (finishing and before.memory is not None):
            return (), True
        folded = await self._summarize(key, memory.summary, turns) if turns else None
        async with self._lease.hold(key) as token:
            current = await self._progress.load(key)
            if current.compacted_through != before.compacted_through:
                raise MemoryConflict("another worker compacted this conversation meanwhile")
            latest = None if finishing else current.memory
            if folded is not None:
                await self._write_long_term(key, turns, *folded, erasure=erasure)
                if latest is not None:
                    latest = apply_compaction(
                        latest, turns=turns, rolling_summary=folded[0].rolling_summary
                    )
            await self._progress.commit_compaction(
                key,
                erasure=erasure,
                lease_token=token,
                expected_compacted_through=before.compacted_through,
                compacted_through=turns[-1] if turns else before.compacted_through,
                memory=latest,
            )
        self._metrics.compactions.labels("finalized" if finishing else "ok").inc()
        log.info("memory.compacted", turns=list(turns), finalize=finishing)
        more = len(turns) >= MAX_TURNS_PER_BATCH and not finishing
        return turns, not more

    async def _summarize(
        self, key: ConversationKey, previous: str, turns: tuple[int, ...]
    ) -> tuple[SummarizerOutput, list[ChatMessage]]:
        """The summarizer's validated output for ``turns`` (no writes). Raises
        ``SummarizerFailed`` on junk: nothing changes and the turns stay pending."""
        messages = await self._progress.trace_turns(key, turns[0], turns[-1])
        stored = related_facts(
            await self._ltm.facts(key.tenant_id, key.user_id),
            " ".join(m.content for m in messages),
        )
        try:
            reply = await self._model.complete_json(
                summarizer_messages(previous, messages, stored),
                schema_name="memory_compaction",
                schema=summarizer_json_schema(),
                conversation_id=key.conversation_id,
            )
        except RetryableError:
            self._metrics.compactions.labels("failed").inc()
            raise
        output = parse_summarizer_output(reply.text)
        if output is None:
            self._metrics.compactions.labels("failed").inc()
            self._metrics.memory_model_junk.labels("summarizer").inc()
            raise SummarizerFailed("summarizer returned invalid output; turns stay pending")
        return output, messages

    async def _write_long_term(
        self,
        key: ConversationKey,
        turns: tuple[int, ...],
        output: SummarizerOutput,
        messages: list[ChatMessage],
        *,
        erasure: str,
    ) -> None:
        """The episode, facts and profile of ``turns``, with provenance. Idempotent: the
        episode's id is keyed by the conversation and the first turn (every compaction
        starts right after the last one), facts merge restatements."""
        now = self._clock().isoformat()
        event_ids = tuple(sorted({m.event_id for m in messages if m.event_id}))
        source = Source(conversation_id=key.conversation_id, turns=turns, event_ids=event_ids)
        episode = EpisodicSummary(
            id=stable_id("ep", key.conversation_id, str(turns[0])),
            conversation_id=key.conversation_id,
            turns=turns,
            summary=output.episode_summary,
            tags=tuple(t.lower() for t in output.episode_tags),
            salience=output.salience,
            created_at=max((m.created_at for m in messages), default=now),  # when it happened
            event_ids=event_ids,
            recorded_at=now,
        )
        profile = [
            ProfileAttribute(
                key=p.key.strip().lower(), value=p.value, updated_at=now, source=source
            )
            for p in output.profile
        ]
        # The facts are read, updated and written back under the *user's* lease: two
        # conversations of one user compacting at once would otherwise each write back
        # what it read, and a correction made in one could be undone by the other.
        async with self._lease.hold(user_scope(key)):
            facts, outcomes = apply_facts(
                await self._ltm.facts(key.tenant_id, key.user_id),
                [item.decision() for item in output.facts],
                salience=output.salience,
                source=source,
                now=now,
            )
            written = await self._ltm.write(
                key.tenant_id,
                key.user_id,
                erasure=erasure,
                profile=profile,
                facts=facts,
                episodes=[episode],
            )
        for kind, count in (("episodes", 1), ("facts", len(facts)), ("profile", len(profile))):
            if count:
                self._metrics.ltm_writes.labels(kind).inc(count)
        for outcome in outcomes:
            self._metrics.ltm_facts.labels(outcome).inc()
        log.info(
            "memory.folded",
            turns=list(turns),
            items_written=written,
            facts_updated=outcomes.count("updated"),
        )
