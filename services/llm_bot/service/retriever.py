"""Retrieval on the reply path (SPEC 5.7): what of the user's memory is relevant to the
current message.

``prepare`` runs before memory is loaded: filler ("ok", "555", "ครับ", emoji) is recognised
without a model call and skips everything; otherwise the query's embedding starts at once,
in a worker thread for a local model, so it overlaps the memory load. ``retrieve`` then
reuses the topic's selection while the message stays on topic (``memory/topic.py``), or
searches the user's index (hybrid, ``memory/hybrid_search.py``) leaving out what the window
and the long-term bundle already show. A failure of the embedding model degrades to keyword
search; a failure of the index to no recalled items: retrieval never fails a reply.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import structlog
from opentelemetry.trace import Tracer

from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.keyword_matching import is_filler
from llm_bot.memory.query_parts import message_query, question_parts
from llm_bot.memory.recall_budget import CANDIDATE_LIMIT, within_tokens
from llm_bot.memory.recall_items import SearchHit
from llm_bot.memory.scripts import mixes_scripts
from llm_bot.memory.tokens import TokenCounter, default_token_counter
from llm_bot.memory.topic import joined, new_topic, recalled_record, reused, stays_on_topic
from llm_bot.memory.topic_state import RecalledRecord, TopicState
from llm_bot.memory.vectors import Vector
from llm_bot.ports import Embedder, RecallIndex
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

Outcome = Literal["searched", "filler_skip", "topic_reuse", "off", "failed", "timeout"]
TimeoutReason = Literal["embedding", "index_load", "search"]
"""What a search that timed out was waiting for: the query's embedding (the embedder
behind, ``LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS``), the user's index loading into this
process (the same budget), or the search itself (``LLM_BOT_RETRIEVAL_TIMEOUT_MS``)."""


@dataclass(frozen=True)
class RetrievalSettings:
    min_score: float
    topic_similarity: float
    max_items: int | None = None
    """An optional cap on recalled items (``LLM_BOT_RETRIEVAL_MAX_ITEMS``); None: as many
    as ``max_tokens`` holds."""
    max_tokens: int = 4000
    """Recall's share of the prompt in tokens (``memory/recall_budget.py``): the input
    budget, at most ``LLM_BOT_RETRIEVAL_MAX_TOKENS``."""
    timeout_seconds: float = 0.05
    """The search's time budget (``LLM_BOT_RETRIEVAL_TIMEOUT_MS``): past it the reply goes
    on without recall (outcome ``timeout``); a big index still loading goes on loading."""
    load_timeout_seconds: float = 1.0
    """The time budget of a search that must first load the user's index into this
    process (``LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS``; the user's first search here, as after
    a deploy): the reply waits that long at most, once, rather than forget everything
    the user said; past it, as past ``timeout_seconds``. Never less than that."""


@dataclass(frozen=True)
class Retrieval:
    """What ``recall`` recalled, and the conversation's topic to keep (None: unchanged)."""

    outcome: Outcome
    records: tuple[RecalledRecord, ...] = ()
    topic: TopicState | None = None
    seconds: float = 0.0
    candidates: tuple[SearchHit, ...] = ()
    """With ``explain``: every hit of the search, best first, the records being those of
    them that recall's token share holds (what the inspector's "why" shows left out)."""
    timed_out: TimeoutReason | None = None
    """With outcome ``timeout``: what the search was waiting for."""


NOTHING = Retrieval("off")


class PreparedQuery:
    """A message on its way to retrieval: its embeddings (the message's, then each of the
    questions it asks when it asks several, ``parts``) may still be computing;
    ``created_at`` is when it was written (what its time expressions are relative to)."""

    def __init__(
        self,
        text: str,
        embeddings: asyncio.Task[list[Vector]] | None,
        created_at: datetime | None = None,
        parts: Sequence[str] = (),
    ) -> None:
        self.text = text
        self.embeddings = embeddings
        self.created_at = created_at
        self.parts = tuple(parts)
        self.started = time.perf_counter()
        self._vectors: list[Vector] | None = None
        self._awaited = False
        self.across: asyncio.Task[Vector | None] | None = None
        """The message embedded for the texts of another script (``Retriever.reach_across``),
        when asked for."""

    def cancel(self) -> None:
        for task in (self.embeddings, self.across):
            if task is not None:
                task.cancel()

    async def vectors(self) -> list[Vector] | None:
        """The message's embedding, then its parts'; None without an embedder or when the
        model failed (the search is then by keywords, the failure logged once)."""
        if self.embeddings is None or self._awaited:
            return self._vectors
        try:
            self._vectors = await self.embeddings
        except LlmBotError as exc:
            log.warning("retrieval.embedding_failed", code=exc.code, **log_fields(exc))
        self._awaited = True
        return self._vectors

    async def across_vector(self) -> Vector | None:
        """The ``across`` embedding, when asked for and not all zeros; None otherwise (a
        failure of the model is logged, and the search goes on without it)."""
        if self.across is None:
            return None
        try:
            return await self.across
        except LlmBotError as exc:
            log.warning("retrieval.embedding_failed", code=exc.code, **log_fields(exc))
            self.across = None
            return None


class Retriever:
    """Searches a user's index for the current message (or decides not to)."""

    def __init__(
        self,
        *,
        embedder: Embedder | None,
        index: RecallIndex,
        settings: RetrievalSettings,
        metrics: Metrics,
        tracer: Tracer,
        counter: TokenCounter | None = None,
    ) -> None:
        self._embedder = embedder
        self._counter = counter or default_token_counter()
        self._index = index
        self._settings = settings
        self._metrics = metrics
        self._tracer = tracer

    def prepare(self, text: str, created_at: datetime | None = None) -> PreparedQuery | None:
        """None for filler (nothing to search for); else the query, embedding started.
        ``created_at``: when the message was written (default: now)."""
        if is_filler(text):
            return None
        parts = question_parts(text)
        task = None
        if self._embedder is not None:
            task = asyncio.create_task(self._embed([text, *parts]))
        return PreparedQuery(text, task, created_at, parts)

    def reach_across(self, query: PreparedQuery | None, conversation: Sequence[str]) -> None:
        """When the ``conversation`` (its window and summary) holds text in another script
        than the message (an English question in a Thai conversation), the message is also
        embedded for the texts its own embedding is not compared with (the embedder's
        ``across`` purpose: the default local embedder's multilingual model), and searched
        with that too: "what is my name?" finds "ฉันชื่อแอนนะคะ". One more embedding, only
        in such conversations; an embedder with one model for every script gives nothing."""
        if (
            query is None
            or self._embedder is None
            or query.across is not None
            or not mixes_scripts(query.text, conversation)
        ):
            return
        query.across = asyncio.create_task(self._embed_across(query.text))

    async def _embed_across(self, text: str) -> Vector | None:
        assert self._embedder is not None  # noqa: S101  # only started with an embedder
        vector = np.asarray(
            (await self._embedder.embed([text], purpose="across"))[0], dtype=np.float32
        )
        return vector if vector.any() else None

    async def _embed(self, texts: list[str]) -> list[Vector]:
        assert self._embedder is not None  # noqa: S101  # only started with an embedder
        vectors = await self._embedder.embed(texts, purpose="query")
        return [np.asarray(vector, dtype=np.float32) for vector in vectors]

    async def retrieve(
        self,
        query: PreparedQuery | None,
        key: ConversationKey,
        *,
        exclude: Collection[str],
        topic: TopicState | None,
        explain: bool = False,
    ) -> Retrieval:
        """The recalled records for ``query``; outcome and duration counted in metrics.
        ``explain``: the search reads on past recall's token share, and every hit is kept
        in ``candidates`` (the records are the same: the hits that fit)."""
        with self._tracer.start_as_current_span("recall.search") as span:
            if query is None:
                result = Retrieval("filler_skip", topic=topic)
            else:
                result = await self._retrieve(
                    query, key, exclude=exclude, topic=topic, explain=explain
                )
            span.set_attribute("llmbot.retrieval.outcome", result.outcome)
            span.set_attribute("llmbot.retrieval.items", len(result.records))
        self._metrics.retrieval_searches.labels(result.outcome).inc()
        self._metrics.retrieval_duration.labels(result.outcome).observe(result.seconds)
        return result

    async def _retrieve(
        self,
        query: PreparedQuery,
        key: ConversationKey,
        *,
        exclude: Collection[str],
        topic: TopicState | None,
        explain: bool,
    ) -> Retrieval:
        try:  # the embedder's queue is not the search's: a budget of its own
            async with asyncio.timeout(self._settings.load_timeout_seconds):
                vectors = await query.vectors()
        except TimeoutError:
            query.cancel()
            return self._timed_out(query, topic, "embedding", self._settings.load_timeout_seconds)
        vector = vectors[0] if vectors else None
        if (
            vector is not None
            and topic is not None
            and stays_on_topic(topic, vector, self._settings.topic_similarity)
        ):
            if query.across is not None:  # no search: its other embedding is not needed
                query.across.cancel()
            reuse = await self.reuse(topic, key, started=query.started)
            on_topic = reuse.outcome == "topic_reuse"  # else: failed, the topic unchanged
            return replace(reuse, topic=joined(topic, vector)) if on_topic else reuse
        try:  # the other script's embedding too, before the search's clock starts
            async with asyncio.timeout(self._settings.load_timeout_seconds):
                await query.across_vector()
        except TimeoutError:
            return self._timed_out(query, topic, "embedding", self._settings.load_timeout_seconds)
        cold = not self._index.loaded(key.tenant_id, key.user_id)
        budget = max(self._settings.timeout_seconds, self._settings.load_timeout_seconds)
        searching = asyncio.ensure_future(
            self.search_prepared(
                query,
                key,
                exclude=exclude,
                max_tokens=None if explain else self._settings.max_tokens,
                fresh_within=self._settings.timeout_seconds,
            )
        )
        try:
            hits = await self._within(searching, budget)
        except TimeoutError:
            return self._timed_out(query, topic, "index_load" if cold else "search", budget)
        except LlmBotError as exc:
            log.warning("retrieval.failed", code=exc.code, **log_fields(exc))
            return Retrieval("failed", topic=topic, seconds=_since(query))
        candidates: tuple[SearchHit, ...] = ()
        if explain:  # the hits of the bounded search are those of all that fit
            candidates = tuple(hits)
            hits = within_tokens(hits, self._settings.max_tokens, self._counter.count)
        records = tuple(record_of(hit) for hit in hits)
        kept_topic = new_topic(vector, records) if vector is not None else None
        return Retrieval("searched", records, kept_topic, _since(query), candidates)

    async def reuse(
        self, topic: TopicState, key: ConversationKey, *, started: float | None = None
    ) -> Retrieval:
        """The topic's selection as its search recalled it (``topic_reuse``), its entries
        read back from the index in one read: what was erased meanwhile drops out. A
        read that fails or takes longer than a search may is a failed or timed-out
        retrieval, as a search's would be (the reply goes on without recall)."""
        started = time.perf_counter() if started is None else started
        budget = max(self._settings.timeout_seconds, self._settings.load_timeout_seconds)
        try:
            async with asyncio.timeout(budget):
                found = await self._index.lookup(key.tenant_id, key.user_id, topic.recalled)
        except TimeoutError:
            log.warning("retrieval.timed_out", reason="search", budget_ms=round(budget * 1000))
            self._metrics.retrieval_timeouts.labels("search").inc()
            seconds = time.perf_counter() - started
            return Retrieval("timeout", topic=topic, seconds=seconds, timed_out="search")
        except LlmBotError as exc:
            log.warning("retrieval.failed", code=exc.code, **log_fields(exc))
            return Retrieval("failed", topic=topic, seconds=time.perf_counter() - started)
        records = reused(topic.picks, found)
        return Retrieval("topic_reuse", records, topic, time.perf_counter() - started)

    async def _within(
        self, searching: asyncio.Future[list[SearchHit]], budget: float
    ) -> list[SearchHit]:
        """``searching``'s hits, given ``budget`` seconds, and ``budget`` more each time
        the process's index loads progressed meanwhile (a page read, a load ended): a
        search behind its user's load, or behind other users' (loaded one at a time after
        a deploy), waits while they go on, however slowly a busy process runs them, and
        times out when none progressed within a whole budget (a stuck Redis or load)."""
        finished = self._index.load_progress()
        try:
            while True:
                done, _ = await asyncio.wait({searching}, timeout=budget)
                if done:
                    return searching.result()
                progress = self._index.load_progress()
                if progress == finished:
                    raise TimeoutError
                finished = progress
        finally:
            searching.cancel()

    def _timed_out(
        self, query: PreparedQuery, topic: TopicState | None, reason: TimeoutReason, budget: float
    ) -> Retrieval:
        """A search past its time budget: the reply goes on without recall, and says so
        (the log, ``llmbot_retrieval_timeouts_total`` by reason, the turn's record)."""
        log.warning("retrieval.timed_out", reason=reason, budget_ms=round(budget * 1000))
        self._metrics.retrieval_timeouts.labels(reason).inc()
        return Retrieval("timeout", topic=topic, seconds=_since(query), timed_out=reason)

    async def search_prepared(
        self,
        query: PreparedQuery,
        key: ConversationKey,
        *,
        exclude: Collection[str],
        max_tokens: int | None = None,
        fresh_within: float | None = None,
    ) -> list[SearchHit]:
        """The user's index searched for a prepared message (its embeddings awaited): the
        message, and each of its questions when it asks several; the hits kept while their
        lines fit in ``max_tokens`` (``recall_budget.within_tokens``), when given.
        ``fresh_within``: the index's copy in this process is searched as it stands when
        it is not brought up to date within that long (``RecallIndex.search``)."""
        search = message_query(
            query.text,
            await query.vectors(),
            query.parts,
            created_at=query.created_at or datetime.now(UTC),
            limit=self._settings.max_items or CANDIDATE_LIMIT,
            min_score=self._settings.min_score,
            exclude=exclude,
            max_tokens=max_tokens,
            token_count=self._counter.count,
            across=await query.across_vector(),
        )
        model = self._embedder.name if self._embedder is not None else ""
        return await self._index.search(
            key.tenant_id, key.user_id, search, model=model, fresh_within=fresh_within
        )

    async def search(
        self,
        text: str,
        key: ConversationKey,
        *,
        exclude: Collection[str],
        created_at: datetime | None = None,
    ) -> list[SearchHit]:
        """``text``, sent at ``created_at`` (default: now), searched as ``recall`` searches
        it, before the token budget: every hit (what the inspector's "why" and
        ``llm-bot recall`` show)."""
        query = self.prepare(text, created_at) or PreparedQuery(text, None, created_at)
        return await self.search_prepared(query, key, exclude=exclude)


def record_of(hit: SearchHit) -> RecalledRecord:
    return recalled_record(hit.entry, round(hit.score, 6))


def _since(query: PreparedQuery) -> float:
    return time.perf_counter() - query.started
