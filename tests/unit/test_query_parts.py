"""A message that asks several things at once: its questions, each searched on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.query_parts import MAX_PARTS, PART_NEAREST, message_query, question_parts
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.search_query import SearchQuery
from llm_bot.service.retriever import RetrievalSettings, Retriever
from llm_bot.telemetry.metrics import Metrics
from tests.support.in_memory import InMemoryErasures
from tests.support.in_memory_index import InMemoryRecallIndex
from tests.support.index_entries import entry
from tests.support.reply_path import KEY

THAI_ASKS_FIVE = (
    "ก่อนสั่งซื้อ ช่วยเตือนหน่อยได้ไหมคะ ว่าฉันชื่ออะไร ที่บ้านพูดภาษาอะไร "
    "หมายเลขคำสั่งซื้อคืออะไร อยากให้ส่งของวันไหน และงบของฉันเท่าไหร่"
)


def test_thai_questions_are_cut_at_the_spaces_between_phrases() -> None:
    """Five questions that ask for something; the polite request before them ("can you
    remind me?", a yes/no particle) is none; the "and" (และ) that joins the last one is
    left out, as "and" is in English."""
    assert question_parts(THAI_ASKS_FIVE) == [
        "ว่าฉันชื่ออะไร",
        "ที่บ้านพูดภาษาอะไร",
        "หมายเลขคำสั่งซื้อคืออะไร",
        "อยากให้ส่งของวันไหน",
        "งบของฉันเท่าไหร่",
    ]
    assert question_parts("ชอบสีอะไร หรือไม่ชอบสีไหน") == ["ชอบสีอะไร", "ไม่ชอบสีไหน"]


def test_english_questions_are_cut_at_commas_and_a_joining_and() -> None:
    text = (
        "Before I order, can you remind me what my name is, what language we speak at "
        "home, which day to deliver and what my budget is?"
    )
    assert question_parts(text) == [
        "can you remind me what my name is",
        "what language we speak at home",
        "which day to deliver",
        "what my budget is?",
    ]
    assert question_parts("How are you? And what did I say about the ferry?") == [
        "How are you?",
        "And what did I say about the ferry?",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "What activities does Melanie partake in?",
        "When did Caroline go to the LGBTQ support group?",
        "I know what you mean, and where you are going with it.",  # a statement
        "Which of these, the red or the blue one, is cheaper?",  # one question
        "ฉันชื่ออะไร",
        "มีสีขาวไหมคะ แล้วมีขนาดใหญ่กว่านี้ไหม",  # two yes/no questions: searched whole
        "ok thanks",
    ],
)
def test_a_message_that_asks_one_thing_has_no_parts(text: str) -> None:
    assert question_parts(text) == []


def test_at_most_max_parts_are_searched() -> None:
    text = ", ".join(f"what is item {n}" for n in range(MAX_PARTS + 3)) + "?"
    assert len(question_parts(text)) == MAX_PARTS


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_each_question_finds_its_answer_where_the_whole_message_finds_none() -> None:
    """The whole message resembles neither answer (cosine under the minimum) and shares no
    word with them; each of its two questions resembles one: searched on their own, both
    answers rank first, and their dense scores are their best over the questions."""
    index = IndexSnapshot()
    index.upsert(
        [
            (entry("name", "Ann here"), unit(1, 0, 0, 0)),
            (entry("budget", "three hundred baht"), unit(0, 1, 0, 0)),
            (entry("noise", "the weather was lovely"), unit(0, 0, 1, 0)),
        ]
    )
    whole = SearchQuery(vector=unit(0.3, 0.3, 0, 1), terms=keyword_terms("remind me"))
    assert search(index, whole) == []
    parts = (
        SearchQuery(vector=unit(0.9, 0, 0, 0.1), terms=keyword_terms("my name")),
        SearchQuery(vector=unit(0, 0.9, 0, 0.1), terms=keyword_terms("my budget")),
    )
    hits = search(index, SearchQuery(vector=whole.vector, terms=whole.terms, parts=parts))
    assert {h.entry.id for h in hits} == {"name", "budget"}
    assert all(h.dense > 0.9 for h in hits)


def test_each_question_brings_its_own_best_above_what_every_question_finds_a_little() -> None:
    """Each question's rankings are fused on their own and an entry keeps its best score:
    the answer to each question ranks above an entry both questions find second (one
    fusion of all their rankings summed the second places and put that entry first)."""
    index = IndexSnapshot()
    index.upsert(
        [
            (entry("name", "Ann here"), unit(1, 0, 0, 0)),
            (entry("budget", "three hundred baht"), unit(0, 1, 0, 0)),
            (entry("both", "a little of each"), unit(0.7, 0.7, 0, 0.14)),
        ]
    )
    parts = (
        SearchQuery(vector=unit(1, 0, 0, 0), terms=()),
        SearchQuery(vector=unit(0, 1, 0, 0), terms=()),
    )
    hits = search(index, SearchQuery(vector=unit(0, 0, 0, 1), terms=(), parts=parts))
    assert [h.entry.id for h in hits] == ["name", "budget", "both"]
    assert hits[0].score == hits[1].score > hits[2].score


class TableEmbedder:
    """Vectors from a table (a text not in it: the zero vector); records each call."""

    name = "table"
    dimension = 4

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str], *, purpose: str) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.table.get(t, np.zeros(4, dtype=np.float32)) for t in texts])

    async def aclose(self) -> None:
        return None


async def retriever_over(
    embedder: TableEmbedder, *said: tuple[IndexEntry, np.ndarray]
) -> Retriever:
    """A retriever with ``embedder`` over an in-memory index of ``said`` (the defaults)."""
    index = InMemoryRecallIndex.on(InMemoryErasures())
    await index.upsert(KEY.tenant_id, KEY.user_id, said, model="table", erasure="")
    return Retriever(
        embedder=embedder,
        index=index,
        settings=RetrievalSettings(min_score=0.45, topic_similarity=0.99),
        metrics=Metrics(registry=CollectorRegistry()),
        tracer=NoOpTracer(),
    )


async def test_the_retriever_embeds_the_questions_with_the_message_and_recalls_each_answer() -> (
    None
):
    """One embedding call for the message and its questions; the records begin with the
    answer to each question, which the whole message's embedding alone would not reach."""
    asked = "Can you remind me what my name is, and what my budget is?"
    embedder = TableEmbedder(
        {
            asked: unit(0.3, 0.3, 0, 1),
            "Can you remind me what my name is": unit(0.9, 0, 0, 0.1),
            "what my budget is?": unit(0, 0.9, 0, 0.1),
        }
    )
    retriever = await retriever_over(
        embedder,
        (entry("name", "Ann here"), unit(1, 0, 0, 0)),
        (entry("budget", "three hundred baht"), unit(0, 1, 0, 0)),
        (entry("noise", "the weather was lovely"), unit(0, 0, 1, 0)),
    )
    query = retriever.prepare(asked)
    assert query is not None
    assert query.parts == ("Can you remind me what my name is", "what my budget is?")
    result = await retriever.retrieve(query, KEY, exclude=(), topic=None)
    assert embedder.calls == [[asked, *query.parts]]
    assert result.outcome == "searched"
    assert {r.id for r in result.records[:2]} == {"name", "budget"}


def test_an_entry_no_ranking_found_relevant_is_not_recalled_on_its_position() -> None:
    """A question's dense ranking holds its nearest few whatever their cosine, but an entry
    with no keyword match and a cosine under the dense minimum is not recalled for its
    place in a ranking (it would pad the prompt with what nothing found relevant); one the
    question's keywords find is, its cosine under the minimum reported as 0."""
    index = IndexSnapshot()
    index.upsert(
        [
            (entry("answer", "three hundred baht"), unit(1, 0, 0, 0)),
            (entry("noise", "the weather was lovely"), unit(0, 0, 1, 0)),
        ]
    )
    weak = unit(0.3, 0, 0, 1)  # cosine 0.29 with the answer
    assert search(index, SearchQuery(vector=weak, terms=())) == []
    whole = SearchQuery(vector=unit(0, 1, 0, 0), terms=())
    part = SearchQuery(vector=weak, terms=(), nearest=PART_NEAREST)
    assert search(index, SearchQuery(vector=whole.vector, terms=(), parts=(part,))) == []
    worded = replace(part, terms=("baht",))
    hits = search(index, SearchQuery(vector=whole.vector, terms=(), parts=(worded,)))
    assert [h.entry.id for h in hits] == ["answer"]
    assert hits[0].dense == 0.0  # found by its word, not counted as a dense match
    near = replace(part, min_score=0.25)  # the question's own minimum counts for it
    hits = search(index, SearchQuery(vector=whole.vector, terms=(), parts=(near,)))
    assert [h.entry.id for h in hits] == ["answer"]


async def test_an_english_question_in_a_thai_conversation_reaches_across() -> None:
    """In a conversation of another script, the message is also embedded ``across`` (the
    other model's vector) and searched by that vector alone: it finds the message whose
    words it does not share; in a conversation of its own script nothing more is asked."""
    asked = "What is my name?"
    thai_name = unit(0, 0, 1, 0)
    embedder = AcrossEmbedder({asked: unit(1, 0, 0, 0)}, across={asked: unit(0, 0, 0.9, 0.1)})
    retriever = await retriever_over(
        embedder,
        (entry("name", "ฉันชื่อแอนนะคะ"), thai_name),
        (entry("noise", "the weather was lovely"), unit(0, 1, 0, 0)),
    )
    alone = retriever.prepare(asked)
    retriever.reach_across(alone, ["Hello!", "echo: Hello!"])
    assert alone is not None
    assert alone.across is None
    assert (await retriever.retrieve(alone, KEY, exclude=(), topic=None)).records == ()
    mixed = retriever.prepare(asked)
    retriever.reach_across(mixed, ["สวัสดีค่ะ", ""])
    result = await retriever.retrieve(mixed, KEY, exclude=(), topic=None)
    assert [r.id for r in result.records][:1] == ["name"]
    assert embedder.purposes.count("across") == 1


def test_the_across_vector_is_one_more_part_without_words() -> None:
    vector = unit(0, 0, 1, 0)
    query = message_query(
        "What is my name?",
        [unit(1, 0, 0, 0)],
        (),
        created_at=datetime(2026, 11, 26, tzinfo=UTC),
        limit=50,
        min_score=0.45,
        across=vector,
    )
    assert query.terms
    assert query.vector is not None
    (reach,) = query.parts
    assert reach.terms == ()
    assert reach.nearest == PART_NEAREST
    assert reach.vector is vector


@pytest.mark.parametrize(
    ("text", "asker"),
    [
        ("How many citrus fruits have I used in my cocktails?", "user"),
        ("งบของฉันเท่าไหร่", "user"),
        ("What did Melanie paint?", None),
    ],
)
def test_a_message_in_the_first_person_names_its_writer(text: str, asker: str | None) -> None:
    """The user's entries are ranked among themselves (``SearchQuery.asker``); the
    questions of a message that asks several are the message's own, and name no one."""
    query = message_query(
        f"{text} And what else, what more?",
        None,
        ["what else", "what more"],
        created_at=datetime(2026, 11, 26, tzinfo=UTC),
        limit=50,
        min_score=0.45,
    )
    assert query.asker == asker
    assert [part.asker for part in query.parts] == [None, None]


class AcrossEmbedder(TableEmbedder):
    """A table for queries and another for the ``across`` purpose."""

    def __init__(self, table: dict[str, np.ndarray], *, across: dict[str, np.ndarray]) -> None:
        super().__init__(table)
        self.across = across
        self.purposes: list[str] = []
        self.across_gate: asyncio.Event | None = None
        """When set, an ``across`` call waits for it."""

    async def embed(self, texts: Sequence[str], *, purpose: str) -> np.ndarray:
        self.purposes.append(purpose)
        if purpose == "across":
            if self.across_gate is not None:
                await self.across_gate.wait()
            return np.stack([self.across.get(t, np.zeros(4, dtype=np.float32)) for t in texts])
        return await super().embed(texts, purpose=purpose)


async def test_a_message_on_topic_does_not_wait_for_its_embedding_across() -> None:
    """The topic's selection is reused (no search): the embedding for the other script,
    still computing, is cancelled."""
    asked = "What is my name?"
    embedder = AcrossEmbedder({asked: unit(1, 0, 0, 0)}, across={asked: unit(0, 0, 1, 0)})
    embedder.across_gate = asyncio.Event()  # the other model never answers
    retriever = await retriever_over(
        embedder,
        (entry("name", "ฉันชื่อแอนนะคะ"), unit(0, 0, 1, 0)),
        (entry("asked", "I asked about my name"), unit(1, 0, 0, 0)),
    )
    first = await retriever.retrieve(retriever.prepare(asked), KEY, exclude=(), topic=None)
    assert first.records  # a selection to stay on
    again = retriever.prepare(asked)
    retriever.reach_across(again, ["สวัสดีค่ะ"])
    reused = await retriever.retrieve(again, KEY, exclude=(), topic=first.topic)
    assert reused.outcome == "topic_reuse"
    assert again is not None
    assert again.across is not None
    with pytest.raises(asyncio.CancelledError):
        await again.across
