"""The "why" dry run (``inspector/why.py``) on fakes, with the budget forced to cut: the
items recall's token budget left out and those the prompt's budget left out are listed as
such, with their ranks; memory is only loaded and nothing is committed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from llm_bot.context_budget import ContextBudget
from llm_bot.graph.state import GraphContext
from llm_bot.inspector.why import dry_run, render_why
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_budget import within_tokens
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.tokens import default_token_counter
from llm_bot.memory.window import WindowBounds
from llm_bot.memory.working import Recalled, WorkingMemory
from llm_bot.service.retriever import RetrievalSettings, Retriever
from llm_bot.telemetry.metrics import Metrics

KEY = ConversationKey("t1", "u1", "c2")
AT = datetime(2025, 7, 30, 10, 0, tzinfo=UTC)
TOPICS = ("museum tickets", "museum opening hours", "museum cafe menu")


def hit(rank: int, topic: str) -> SearchHit:
    text = f"We talked about the {topic}. " + " ".join(f"detail{rank}x{i}" for i in range(15))
    entry = IndexEntry(
        id=f"m|c1|e{rank}",
        kind="message",
        text=text,
        speaker="Ann",
        date="2025-07-01T09:00:00+00:00",
        conversation_id="c1",
        turn=rank,
        seq=0,
        source_id=f"e{rank}",
        terms=tuple(keyword_terms(text)),
    )
    return SearchHit(
        entry=entry, score=1.0 - rank / 10, dense=0.0, keyword=5.0 - rank, feedback=rank / 2
    )


class FakeMemory:
    """Loads one conversation; refuses any commit (a dry run writes nothing)."""

    def __init__(self, recalled: Recalled) -> None:
        self.recalled = recalled
        self.loads: list[tuple[ConversationKey, str]] = []

    async def load(self, key: ConversationKey, event_id: str) -> Recalled:
        self.loads.append((key, event_id))
        return self.recalled

    async def commit(self, commit: Any) -> int:
        raise AssertionError("a dry run committed")


class FakeIndex:
    """Answers every search with the same hits, best first, as many as the query's token
    bound holds (as every index does)."""

    def __init__(self, hits: list[SearchHit]) -> None:
        self.hits = hits
        self.queries: list[SearchQuery] = []

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        fresh_within: float | None = None,
    ) -> list[SearchHit]:
        self.queries.append(query)
        if query.max_tokens is None or query.token_count is None:
            return list(self.hits)
        return within_tokens(self.hits, query.max_tokens, query.token_count)

    def loaded(self, tenant_id: str, user_id: str) -> bool:
        return True

    def load_progress(self) -> int:
        return 0


def context(memory: FakeMemory, index: FakeIndex, *, input_budget: int) -> GraphContext:
    metrics = Metrics(registry=CollectorRegistry())
    retriever = Retriever(
        embedder=None,
        index=index,  # type: ignore[arg-type]  # a search-only fake
        settings=RetrievalSettings(min_score=0.0, topic_similarity=0.99, max_tokens=200),
        metrics=metrics,
        tracer=NoOpTracer(),
    )
    return GraphContext(
        memory=memory,  # a load-only fake
        model=None,  # type: ignore[arg-type]  # never called
        model_name="fake-model",
        bounds=WindowBounds(50, 100_000),
        system_prompt="You are a helpful assistant.",
        clock=lambda: AT,
        tracer=NoOpTracer(),
        metrics=metrics,
        budget=ContextBudget(input_budget + 10, 10, 0),
        counter=default_token_counter(),
        retriever=retriever,
    )


def window() -> WorkingMemory:
    said = [("user", "Hello there"), ("assistant", "Hi! How can I help?")]
    return WorkingMemory(
        messages=tuple(
            ChatMessage(
                id=f"w{i}",
                role=role,
                content=text,
                created_at="2025-07-30T09:00:00+00:00",
                turn=1,
                seq=i,
            )
            for i, (role, text) in enumerate(said)
        )
    )


async def test_items_cut_by_the_recall_and_the_prompt_budget_are_listed() -> None:
    """Three hits: recall's 200 tokens hold two (the third: "recall budget"); a tight
    input budget leaves the second out of the prompt ("prompt budget"); each keeps its
    fused rank and keyword score; the prompt stays within the budget; one search gives
    both what was recalled and what was left out."""
    memory = FakeMemory(Recalled(memory=window(), last_turn=1, version=3, processed=None))
    index = FakeIndex([hit(rank, topic) for rank, topic in enumerate(TOPICS, start=1)])
    ctx = context(memory, index, input_budget=200)
    data = await dry_run(ctx, KEY, "What about the museum?", AT)
    assert data["retrieval"] == "searched"
    listed = [(i["fused_rank"], i["in_prompt"], i["left_out"]) for i in data["recalled"]]
    assert listed == [(1, True, None), (2, False, "prompt budget"), (3, False, "recall budget")]
    assert data["dropped"]["recalled"] == 1
    assert [i["keyword_score"] for i in data["recalled"]] == [4.0, 3.0, 2.0]
    assert [i["feedback_score"] for i in data["recalled"]] == [0.5, 1.0, 1.5]
    assert data["tokens"] <= data["budget"] == 200
    assert memory.loads == [(KEY, "inspector:why")]
    assert len(index.queries) == 1  # one search: what recall's budget cut is its tail
    assert index.queries[0].max_tokens is None
    text = render_why(data)
    assert "left out (recall budget)" in text
    assert "left out (prompt budget)" in text
    assert "keyword 4.0 dense 0.0 feedback 0.5" in text


async def test_with_room_every_recalled_item_is_in_the_prompt() -> None:
    """The same hits with a roomy budget: the two recalled items are in the prompt; only
    the one recall's budget cut is left out."""
    memory = FakeMemory(Recalled(memory=window(), last_turn=1, version=3, processed=None))
    index = FakeIndex([hit(rank, topic) for rank, topic in enumerate(TOPICS, start=1)])
    data = await dry_run(context(memory, index, input_budget=20_000), KEY, "The museum?", AT)
    left_out = [item["left_out"] for item in data["recalled"]]
    assert left_out == [None, None, "recall budget"]
    assert not any(data["dropped"].values())
