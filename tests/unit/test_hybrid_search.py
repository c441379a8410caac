"""Hybrid search over one user's index: dense + BM25 fused, exclusions, near-duplicates."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.ranking import (
    FEEDBACK_TERMS,
    bm25_scores,
    feedback_asked,
    feedback_terms,
    fuse,
    named_speakers,
    query_speakers,
    speaker_ranking,
)
from llm_bot.memory.recall_budget import within_tokens
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.time_expressions import Period
from llm_bot.memory.tokens import TiktokenCounter
from llm_bot.memory.vectors import Vector
from tests.support.embeddings import hashed_vector
from tests.support.index_entries import entry

COUNTER = TiktokenCounter()


def half(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` rounded to half precision, as the snapshot keeps embeddings and rounds
    the query (``vectors.half_products``), then computed with in single precision."""
    return np.asarray(vectors, dtype=np.float16).astype(np.float32)


def snapshot(*texts: str) -> IndexSnapshot:
    index = IndexSnapshot()
    index.upsert((entry(f"e{n}", text), hashed_vector(text)) for n, text in enumerate(texts))
    return index


def query(text: str, **kwargs: object) -> SearchQuery:
    return SearchQuery(vector=hashed_vector(text), terms=keyword_terms(text), **kwargs)  # type: ignore[arg-type]


def test_relevant_entry_ranks_first() -> None:
    """The entry sharing the query's words ranks above unrelated ones."""
    index = snapshot("I love hiking in the mountains", "My order number is 4471", "Nice weather")
    hits = search(index, query("what is my order number"))
    assert hits[0].entry.text == "My order number is 4471"
    assert 0 < hits[0].score <= 1


def test_entry_found_by_one_ranking_alone() -> None:
    """A keyword match below the dense minimum is still found (fusion of two rankings)."""
    index = snapshot("the parcel 4471 left the depot", "completely unrelated words here")
    hits = search(index, SearchQuery(vector=hashed_vector("zzz"), terms=["4471"], min_score=0.99))
    assert [h.entry.text for h in hits] == ["the parcel 4471 left the depot"]
    assert hits[0].dense == 0.0
    assert hits[0].keyword > 0


def test_dense_only_match_below_min_score_is_dropped() -> None:
    """Without keyword overlap, an entry needs cosine >= min_score."""
    index = snapshot("apples and oranges")
    vector = hashed_vector("apples pears")
    low = search(index, SearchQuery(vector=vector, terms=[], min_score=0.99))
    high = search(index, SearchQuery(vector=vector, terms=[], min_score=0.1))
    assert low == []
    assert len(high) == 1


def test_excluded_sources_never_appear() -> None:
    """What the window already shows is left out."""
    index = snapshot("my order number is 4471", "order 4471 shipped")
    hits = search(index, query("order 4471", exclude={"e0"}))
    assert [h.entry.id for h in hits] == ["e1"]


def test_near_duplicates_collapse_into_the_better_one() -> None:
    """The same text said twice is recalled once."""
    index = snapshot("My order number is 4471.", "my  order number is 4471", "order shipped")
    hits = search(index, query("order number 4471"))
    texts = [h.entry.text for h in hits]
    assert len([t for t in texts if "4471" in t]) == 1


def test_a_reply_that_quotes_a_message_collapses_into_it() -> None:
    """An echo or a quote of a kept text adds nothing (the fake model echoes; assistants
    quote), even when the embeddings differ by the speaker prefix; a text that only shares
    a part with a kept one stays."""
    message = "หมายเลขคำสั่งซื้อของฉันคือ 4471 ค่ะ กระติกน้ำร้อนต้องประกอบเองไหมคะ"
    index = IndexSnapshot()
    index.upsert(
        [
            (entry("m1", message), hashed_vector(f"user: {message}")),
            (
                entry("a1", f"echo: {message}", speaker="assistant"),
                hashed_vector(f"assistant: echo: {message}"),
            ),
            (entry("m2", "4471 ค่ะ"), hashed_vector("user: 4471 ค่ะ")),
        ]
    )
    hits = search(index, SearchQuery(vector=None, terms=keyword_terms("4471 ค่ะ"), limit=9))
    assert sorted(h.entry.id for h in hits) in (["m1", "m2"], ["a1", "m2"])


def test_limit_and_empty_index() -> None:
    """At most ``limit`` hits; an empty index finds nothing."""
    index = snapshot(*[f"note {n} about cats" for n in range(10)])
    assert len(search(index, query("cats", limit=3))) == 3
    assert search(IndexSnapshot(), query("cats")) == []


def test_upsert_replaces_text_terms_and_vector() -> None:
    """An entry written again with new text is found by the new text only."""
    index = snapshot("I like tea")
    index.upsert([(entry("e0", "I like coffee"), hashed_vector("I like coffee"))])
    assert len(index) == 1
    assert search(index, query("tea")) == []
    assert [h.entry.text for h in search(index, query("coffee"))] == ["I like coffee"]


def test_keyword_only_search_without_vector() -> None:
    """With dense search off (no embedding), BM25 alone ranks."""
    index = snapshot("red bicycle for sale", "blue car")
    hits = search(index, SearchQuery(vector=None, terms=keyword_terms("bicycle")))
    assert [h.entry.text for h in hits] == ["red bicycle for sale"]


def test_vectors_of_another_size_match_nothing_densely() -> None:
    """A vector of the wrong dimension is stored as zeros instead of failing."""
    index = snapshot("alpha beta")
    index.upsert([(entry("odd", "gamma"), np.ones(3, dtype=np.float32))])
    hits = search(index, SearchQuery(vector=hashed_vector("gamma"), terms=[], min_score=0.1))
    assert hits == []


def test_bm25_over_fetched_entries_is_the_snapshot_bm25() -> None:
    """BM25 over the entries holding a query term, with the index's count and average
    length, scores them as the snapshot does."""
    index = snapshot("cats and more cats", "birds fly south", "my cat sleeps", "the dog and a cat")
    terms = keyword_terms("cat dog cat")
    lengths = [len(e.terms) for e in index.entries]
    holders = [n for n, e in enumerate(index.entries) if set(e.terms) & set(terms)]
    fetched = bm25_scores(
        [index.entries[n].terms for n in holders],
        terms,
        count=len(index),
        average=sum(lengths) / len(lengths),
    )
    assert fetched == pytest.approx(index.keyword_scores(terms)[holders])


def conversation_of_two(*lines: tuple[str, str]) -> IndexSnapshot:
    index = IndexSnapshot()
    index.upsert(
        (entry(f"e{n}", text, speaker=speaker), hashed_vector(text))
        for n, (speaker, text) in enumerate(lines)
    )
    return index


TWO_PEOPLE = (
    ("Caroline", "The lake! The lake at dawn"),
    ("Melanie", "We spent a long quiet weekend at a cabin near a lake with friends and the dog"),
    ("Melanie", "I signed up for a pottery class"),
    ("Melanie", "Pottery is calming"),
    ("Caroline", "The bowl I made in the pottery class cracked in the kiln yesterday"),
)


def test_a_named_speakers_words_rank_above_the_same_words_of_another() -> None:
    """ "Melanie ... lake": Melanie's long message about a lake ranks above Caroline's
    short one, which plain BM25 prefers (the name, a term of half the entries, barely
    counts there)."""
    index = conversation_of_two(*TWO_PEOPLE)
    plain = search(index, SearchQuery(vector=None, terms=keyword_terms("the lake")))
    assert plain[0].entry.speaker == "Caroline"
    hits = search(
        index, SearchQuery(vector=None, terms=keyword_terms("Did Melanie go to the lake?"))
    )
    assert hits[0].entry.id == "e1"


def test_speaker_ranking_is_left_out_when_it_would_not_differ() -> None:
    """Nobody named, or every matching entry a named speaker's: plain keyword + dense."""
    keyword = np.array([2.0, 1.0, 0.0, 3.0], dtype=np.float32)
    keep = np.ones(4, dtype=np.bool_)
    assert speaker_ranking(keyword, keep, np.zeros(4, dtype=np.bool_)) is None
    assert speaker_ranking(keyword, keep, np.array([True, True, False, True])) is None
    assert speaker_ranking(keyword, keep, np.array([True, False, False, False])) == [0]
    assert speaker_ranking(keyword, np.array([False, True, True, True]), keyword > 0) is None


def test_named_speakers_match_names_as_keyword_terms() -> None:
    """Possessives and case do not matter; a speaker without a name is never named."""
    speakers = ["Caroline", "Melanie", "Jon", ""]
    assert named_speakers(speakers, keyword_terms("What is Caroline's identity?")) == {"Caroline"}
    assert named_speakers(speakers, keyword_terms("what do jon and MELANIE share")) == {
        "Jon",
        "Melanie",
    }
    assert named_speakers(speakers, keyword_terms("where did we go camping")) == set()


def test_both_named_speakers_rank_as_without_the_speaker_ranking() -> None:
    """A question naming everyone who spoke ranks as keyword + dense alone would."""
    index = conversation_of_two(*TWO_PEOPLE)
    both = search(index, SearchQuery(vector=None, terms=keyword_terms("Caroline Melanie pottery")))
    alone = search(index, SearchQuery(vector=None, terms=keyword_terms("pottery")))
    assert [h.entry.id for h in both][:2] == [h.entry.id for h in alone][:2]


USER_AND_ASSISTANT = (
    ("assistant", "Lemon, the classic citrus"),
    ("user", "Yesterday I made a cocktail with lemon and the guests asked for the recipe"),
    ("assistant", "Try orange zest in a cocktail"),
    ("user", "The weather is nice"),
)


def test_a_first_person_question_ranks_the_askers_words_first() -> None:
    """ "Did I use lemon?": the user's long message about lemon ranks above the assistant's
    short one, which plain BM25 prefers; the asker's entries are ranked among themselves,
    as a named speaker's are."""
    index = conversation_of_two(*USER_AND_ASSISTANT)
    terms = keyword_terms("Did I use lemon?")
    plain = search(index, SearchQuery(vector=None, terms=terms))
    assert [h.entry.id for h in plain][:2] == ["e0", "e1"]
    asked = search(index, SearchQuery(vector=None, terms=terms, asker="user"))
    assert [h.entry.id for h in asked][:2] == ["e1", "e0"]


def test_the_asker_is_named_besides_the_query_speakers_by_name() -> None:
    speakers = ["Caroline", "user", "assistant"]
    terms = keyword_terms("what did I tell Caroline")
    assert query_speakers(speakers, SearchQuery(vector=None, terms=terms)) == {"Caroline"}
    asked = SearchQuery(vector=None, terms=terms, asker="user")
    assert query_speakers(speakers, asked) == {"Caroline", "user"}
    assert query_speakers([], asked) == {"user"}  # no entry of the asker: ranks nothing


def test_an_asker_without_entries_ranks_as_without_it() -> None:
    index = conversation_of_two(*TWO_PEOPLE)
    terms = keyword_terms("my pottery class")
    plain = search(index, SearchQuery(vector=None, terms=terms))
    asked = search(index, SearchQuery(vector=None, terms=terms, asker="user"))
    assert [(h.entry.id, h.score) for h in asked] == [(h.entry.id, h.score) for h in plain]


def sentences_entry(entry_id: str, text: str) -> tuple[IndexEntry, np.ndarray]:
    item = entry(entry_id, text)
    return item, np.vstack([hashed_vector(t) for t in item.embedding_texts])


def test_an_entry_scores_the_best_cosine_of_its_sentences() -> None:
    """Dense score = max over the entry's own embedding and its sentences'; a query that
    resembles one sentence finds the message, and the hit is the whole message."""
    index = IndexSnapshot()
    index.upsert(
        [
            sentences_entry("e0", "We went camping. The kids watched the meteor shower all night."),
            sentences_entry("e1", "My bicycle has a flat tyre"),
        ]
    )
    sentence = hashed_vector("user: The kids watched the meteor shower all night.")
    whole = index.vector("e0")
    assert whole is not None
    assert float(whole @ sentence) < 0.9
    assert index.dense_scores(sentence)[0] == pytest.approx(1.0, abs=1e-3)  # half precision
    hits = search(index, SearchQuery(vector=sentence, terms=[], min_score=0.99))
    assert [h.entry.text for h in hits] == [
        "We went camping. The kids watched the meteor shower all night."
    ]
    assert index.weight == 2 + 2


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(1, 6), st.integers(0, 10_000)),
        min_size=1,
        max_size=120,
    )
)
def test_sentence_vectors_survive_replacement_and_compaction(
    writes: list[tuple[int, int, int]],
) -> None:
    """After any sequence of writes (entries replaced with more or fewer sentences, the
    orphaned rows compacted), every entry's dense score is the brute-force best cosine of
    its latest embeddings, and the weight counts them."""
    rng = np.random.default_rng(7)
    index = IndexSnapshot(dimension=8)
    latest: dict[str, np.ndarray] = {}
    for key, rows, seed in writes:
        vectors = np.random.default_rng(seed).normal(size=(rows, 8)).astype(np.float32)
        index.upsert([(entry(f"e{key}", f"text {key}"), vectors)])
        latest[f"e{key}"] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    probe = rng.normal(size=8).astype(np.float32)
    probe /= np.linalg.norm(probe)
    scores = index.dense_scores(probe)
    for row, item in enumerate(index.entries):
        best = float((half(latest[item.id]) @ half(probe)).max())
        assert scores[row] == pytest.approx(best, abs=1e-5)
        assert scores[row] == pytest.approx(float((latest[item.id] @ probe).max()), abs=2e-3)
    assert index.weight == sum(len(v) for v in latest.values())


def test_fusion_ties_go_to_the_closer_meaning() -> None:
    """Second in one ranking and third in the other, or the reverse: the same fused score;
    the higher dense score ranks first, whatever the rows' order."""
    dense = np.asarray([0.0, 0.5, 0.7], dtype=np.float32)
    keyword = np.asarray([3.0, 2.0, 1.0], dtype=np.float32)
    fused = fuse([[0, 1, 2], [0, 2, 1]], (dense, keyword))
    assert [row for row, _ in fused] == [0, 2, 1]
    assert fused[1][1] == fused[2][1]


WORDS = ("cat", "dog", "garden", "tea", "bike", "moon", "river", "piano")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 9),
            st.integers(1, 4),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_removals_leave_what_a_fresh_build_of_the_rest_holds(
    steps: list[tuple[bool, int, int, list[str]]],
) -> None:
    """After any mix of writes, removals and searches, every remaining entry scores
    (dense with its sentences, BM25) exactly as in a snapshot built from scratch of the
    remaining entries; removed ones are gone, the weight counts what remains, and each source's rows (entries
    of one message move, are replaced, change source) are found by its id."""
    index = IndexSnapshot(dimension=8)
    latest: dict[str, tuple[IndexEntry, np.ndarray]] = {}
    for remove, key, rows, words in steps:
        entry_id = f"e{key}"
        if remove:
            assert index.remove([entry_id]) == (1 if entry_id in latest else 0)
            latest.pop(entry_id, None)
            continue
        seed = sum(map(ord, " ".join(words))) + rows
        vectors = np.random.default_rng(seed).normal(size=(rows, 8)).astype(np.float32)
        item = entry(entry_id, " ".join(words), source=f"m{(key + len(words)) % 4}")
        index.upsert([(item, vectors)])
        latest[entry_id] = (item, vectors)
        index.keyword_scores([words[0]])  # postings read between writes (kept as arrays)
    for source in ("m0", "m1", "m2", "m3"):  # a window's exclusion finds every entry of it
        found = sorted(index.rows_of([source]))
        assert found == [r for r, e in enumerate(index.entries) if e.source_id == source]
    fresh = IndexSnapshot(dimension=8)
    fresh.upsert(latest.values())
    probe = np.random.default_rng(3).normal(size=8).astype(np.float32)
    terms = list(WORDS)
    assert {e.id for e in index.entries} == set(latest)
    assert index.weight == fresh.weight
    dense = dict(zip((e.id for e in index.entries), index.dense_scores(probe), strict=True))
    keyword = dict(zip((e.id for e in index.entries), index.keyword_scores(terms), strict=True))
    for row, item in enumerate(fresh.entries):
        assert dense[item.id] == pytest.approx(float(fresh.dense_scores(probe)[row]), abs=1e-5)
        assert keyword[item.id] == pytest.approx(float(fresh.keyword_scores(terms)[row]), abs=1e-5)
        assert index.get(item.id) == item


BLOCKS = ((0, 3), (3, 8), (0, 8), None)
"""What a row of a joint space may hold: the first model's columns, the second's, both
(an entry's own embedding as the mean of sentences in two scripts), or nothing."""


def block_rows(seed: int, kinds: list[int]) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = np.zeros((len(kinds), 8), dtype=np.float32)
    for row, kind in enumerate(kinds):
        columns = BLOCKS[kind]
        if columns is not None:
            rows[row, columns[0] : columns[1]] = rng.normal(size=columns[1] - columns[0])
    return rows


def brute_force_best(vectors: np.ndarray, probe: np.ndarray) -> float:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return float((half(unit) @ half(probe / np.linalg.norm(probe))).max())


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 9),
            st.lists(st.integers(0, 3), min_size=1, max_size=5),
            st.integers(0, 10_000),
        ),
        min_size=1,
        max_size=100,
    ),
    st.sampled_from(((0, 3), (3, 8), (0, 8), (1, 3))),
)
def test_embeddings_kept_by_block_score_as_the_whole_rows_would(
    steps: list[tuple[bool, int, list[int], int]], probe_columns: tuple[int, int]
) -> None:
    """Rows of a joint space (zero outside one model's columns, or not, or all zero) are
    kept by block; after any writes, replacements and removals, every entry scores the
    brute-force best cosine of its latest rows (0 for a zero row), whatever columns the
    query reaches, its own embedding reads back whole, and the weight counts every row."""
    index = IndexSnapshot(dimension=8)
    latest: dict[str, np.ndarray] = {}
    for remove, key, kinds, seed in steps:
        entry_id = f"e{key}"
        if remove:
            assert index.remove([entry_id]) == (1 if entry_id in latest else 0)
            latest.pop(entry_id, None)
            continue
        rows = block_rows(seed, kinds)
        index.upsert([(entry(entry_id, f"text {key}"), rows)])
        latest[entry_id] = rows
    probe = np.zeros(8, dtype=np.float32)
    low, high = probe_columns
    probe[low:high] = np.random.default_rng(11).normal(size=high - low)
    scores = index.dense_scores(probe)
    assert {e.id for e in index.entries} == set(latest)
    for row, item in enumerate(index.entries):
        rows = latest[item.id]
        assert scores[row] == pytest.approx(brute_force_best(rows, probe), abs=1e-5)
        own = index.vector(item.id)
        assert own is not None
        norm = np.linalg.norm(rows[0])
        assert own == pytest.approx(half(rows[0] / norm if norm else rows[0]), abs=1e-6)
    assert index.weight == sum(len(v) for v in latest.values())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=4), st.integers(0, 10_000)),
        min_size=2,
        max_size=40,
    ),
    st.lists(st.integers(0, 39), max_size=8),
    st.sampled_from(((0, 3), (3, 8), (0, 8), (1, 3))),
)
def test_a_whole_index_added_at_once_is_the_index_added_entry_by_entry(
    written: list[tuple[list[int], int]], removed: list[int], probe_columns: tuple[int, int]
) -> None:
    """Entries all new to a snapshot (a cold load) are added a matrix at a time; the
    snapshot is the one built entry by entry: the same dense and keyword scores, own
    embeddings, weight and search hits, and it takes removals and later writes the same."""
    batch = [
        (entry(f"e{n}", f"word{seed % 7} text {n} w{seed % 3}"), block_rows(seed, kinds))
        for n, (kinds, seed) in enumerate(written)
    ]
    together, one_by_one = IndexSnapshot(dimension=8), IndexSnapshot(dimension=8)
    together.upsert(batch)
    for item in batch:
        one_by_one.upsert([item])
    gone = [f"e{n}" for n in removed]
    assert together.remove(gone) == one_by_one.remove(gone)
    later = (entry("late", "word1 late text"), block_rows(1, [0, 1]))
    together.upsert([later])
    one_by_one.upsert([later])
    probe = np.zeros(8, dtype=np.float32)
    low, high = probe_columns
    probe[low:high] = np.random.default_rng(5).normal(size=high - low)
    assert [e.id for e in together.entries] == [e.id for e in one_by_one.entries]
    assert together.dense_scores(probe).tolist() == one_by_one.dense_scores(probe).tolist()
    terms = ("word1", "text", "w2")
    assert together.keyword_scores(terms).tolist() == one_by_one.keyword_scores(terms).tolist()
    assert together.weight == one_by_one.weight
    for kept in together.entries:
        mine, theirs = together.vector(kept.id), one_by_one.vector(kept.id)
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert mine.tolist() == theirs.tolist()
    asked = SearchQuery(vector=probe, terms=terms, min_score=0.1)
    assert search(together, asked) == search(one_by_one, asked)


def test_an_english_query_reads_the_english_block_only() -> None:
    """Two models' rows in one joint space are two matrices, each at its model's width:
    a query of one model multiplies that model's rows alone."""
    index = IndexSnapshot(dimension=8)
    index.upsert(
        [
            (entry("en", "cats"), block_rows(1, [0, 0])),
            (entry("th", "แมว"), block_rows(2, [1, 1, 1])),
        ]
    )
    blocks = index._embeddings._blocks
    assert {k: (b.matrix.shape[1], b.live) for k, b in blocks.items()} == {
        (0, 3): (3, 2),
        (3, 8): (5, 3),
    }
    scores = index.dense_scores(block_rows(3, [0])[0])
    assert scores[0] != 0
    assert scores[1] == 0  # no row of the query's model: no product, cosine 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 400),
    st.integers(1, 40),
)
def test_a_search_within_tokens_keeps_what_the_budget_keeps_of_the_whole(
    writes: list[tuple[int, list[str]]], budget: int, limit: int
) -> None:
    """A search bounded by tokens stops where the budget stops the unbounded search's hits
    (``within_tokens``): the same hits, in the same order, without reading further."""
    index = IndexSnapshot(dimension=8)
    for key, words in writes:
        seed = sum(map(ord, " ".join(words)))
        vector = np.random.default_rng(seed).normal(size=8).astype(np.float32)
        index.upsert([(entry(f"e{key}", " ".join(words)), vector)])
    probe = np.random.default_rng(5).normal(size=8).astype(np.float32)
    terms = keyword_terms("cat garden piano moon")
    whole = SearchQuery(vector=probe, terms=terms, limit=limit, min_score=-1.0)
    bounded = replace(whole, max_tokens=budget, token_count=COUNTER.count)
    expected = within_tokens(search(index, whole), budget, COUNTER.count)
    assert search(index, bounded) == expected


def test_rows_of_one_model_keep_their_block_beside_rows_that_span_both() -> None:
    """An entry whose own embedding spans both models (the mean of sentences in two
    scripts) starts a block of its own; the first model's rows stay at their width, and
    one of them whose first value is 0 joins them rather than starting another."""
    index = IndexSnapshot(dimension=8)
    index.upsert([(entry("mixed", "cats แมว"), block_rows(1, [2, 0, 1]))])
    edge = block_rows(2, [0])
    edge[0, 0] = 0.0
    index.upsert([(entry("en", "cats"), block_rows(3, [0])), (entry("edge", "dogs"), edge)])
    blocks = index._embeddings._blocks
    assert {k: b.live for k, b in blocks.items()} == {(0, 8): 1, (0, 3): 3, (3, 8): 1}


def test_own_embeddings_are_gathered_by_block_in_single_precision() -> None:
    """The collapse's embeddings: each entry's own, as its block keeps it (half precision,
    as Redis stores it), returned in single precision with the block's first column; an
    entry whose own embedding is zero gets an empty vector."""
    index = IndexSnapshot(dimension=8)
    rows = {
        "en": block_rows(1, [0, 0]),
        "th": block_rows(2, [1]),
        "mixed": block_rows(3, [2, 0, 1]),
        "none": block_rows(4, [3, 0]),
    }
    index.upsert((entry(key, key), value) for key, value in rows.items())
    ids = [e.id for e in index.entries]
    gathered = index.own_vectors([ids.index(k) for k in ("th", "none", "en", "mixed", "th")])
    assert [start for _, start in gathered] == [3, 0, 0, 0, 3]
    assert gathered[1][0].size == 0
    for (vector, start), key in zip(gathered, ("th", "none", "en", "mixed", "th"), strict=True):
        assert vector.dtype == np.float32
        own = rows[key][0] / (np.linalg.norm(rows[key][0]) or 1.0)
        assert vector == pytest.approx(half(own)[start : start + vector.size], abs=1e-7)
    assert all(b.matrix.dtype == np.float16 for b in index._embeddings._blocks.values())


def test_feedback_adds_the_words_the_best_entries_share_rarest_first() -> None:
    """Relevance feedback's words: held by two or more of the first entries, not asked,
    weighted by how many hold them times their IDF (a word most entries hold weighs
    little), ties in alphabetical order, at most ``FEEDBACK_TERMS``."""
    documents = [
        ["biscuit", "puppy", "vet", "the"],
        ["biscuit", "puppy", "shoe", "the"],
        ["vet", "shot", "the", "biscuit"],
        ["violin"],
    ]
    frequency = {"biscuit": 3, "vet": 2, "the": 90, "puppy": 2, "shoe": 1, "shot": 1}
    assert feedback_terms(documents, {"puppy"}, frequency, 100) == ["biscuit", "vet", "the"]
    assert feedback_terms(documents, {"puppy", "biscuit"}, frequency, 100) == ["vet", "the"]
    assert feedback_terms(documents[3:], set(), frequency, 100) == []  # none shared
    many = [[f"w{n}" for n in range(30)]] * 2
    assert (
        feedback_terms(many, set(), {}, 100) == sorted(f"w{n}" for n in range(30))[:FEEDBACK_TERMS]
    )


def test_feedback_does_not_add_the_speakers_names() -> None:
    """An entry's terms lead with its speaker's name: feedback leaves the names of the
    entries' speakers out, as it leaves out the query's own words."""
    asked = feedback_asked(
        SearchQuery(vector=None, terms=["puppi"]), ["Caroline", "user", "Caroline"]
    )
    assert asked == {"puppi", *keyword_terms("Caroline"), *keyword_terms("user")}


def test_an_entry_only_a_period_ranks_is_not_recalled() -> None:
    """A named period ranks every entry dated within it by cosine, whatever the minimum;
    one with no keyword match and a cosine under it (nothing found it relevant) is placed
    in the fusion but not recalled, one the keywords match is."""
    index = IndexSnapshot()
    dated = [
        ("cook", "We cooked a curry for dinner", "2023-05-24"),
        ("train", "The train was late again", "2023-05-25"),
        ("april", "We cooked pasta for dinner", "2023-04-02"),
    ]
    index.upsert(
        (replace(entry(key, text), date=f"{day}T10:00:00+00:00"), hashed_vector(text))
        for key, text, day in dated
    )
    last_week = Period(date(2023, 5, 22), date(2023, 5, 28))
    asked = SearchQuery(vector=unit_vector(0), terms=["dinner"], periods=(last_week,))
    assert float(index.dense_scores(asked.vector)[1]) < asked.min_score  # type: ignore[arg-type]
    hits = search(index, asked)
    assert [h.entry.id for h in hits] == ["cook", "april"]
    assert all(h.keyword > 0 for h in hits)


def test_an_entry_only_relevance_feedback_finds_is_recalled_with_its_score() -> None:
    """The words the best entries share find an entry without the query's words and under
    the dense minimum: it is recalled, its feedback score saying why."""
    index = snapshot(
        "Our new puppy is called Biscuit",
        "Biscuit the puppy chewed every shoe in the flat",
        "The vet says Biscuit needs his shots next week",
        "The train was late again this morning",
    )
    hits = search(index, query("How is the new puppy?", min_score=0.9))
    by_id = {h.entry.id: h for h in hits}
    assert set(by_id) == {"e0", "e1", "e2"}
    assert (by_id["e2"].keyword, by_id["e2"].dense) == (0, 0)
    assert by_id["e2"].feedback > 0


def unit_vector(axis: int, size: int = 64) -> Vector:
    vector = np.zeros(size, dtype=np.float32)
    vector[axis] = 1.0
    return vector


TOPIC_WORDS = ["sister", "dinner", "curry", "train", "family", "violin", "puppy", "shots"]


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(TOPIC_WORDS), min_size=1, max_size=4).map(" ".join),
        min_size=1,
        max_size=12,
    ),
    vectors=st.lists(st.integers(0, 5), min_size=12, max_size=12),
    asked=st.lists(st.sampled_from(TOPIC_WORDS), max_size=2),
    part_words=st.lists(st.sampled_from(TOPIC_WORDS), max_size=2),
    axis=st.integers(0, 5),
    part_axis=st.integers(0, 5),
    min_score=st.floats(0.3, 0.99),
    with_period=st.booleans(),
)
def test_a_hit_is_always_what_a_score_found_relevant(
    *,
    texts: list[str],
    vectors: list[int],
    asked: list[str],
    part_words: list[str],
    axis: int,
    part_axis: int,
    min_score: float,
    with_period: bool,
) -> None:
    """Whatever the rankings (the message's, a question's nearest few, a named period's,
    relevance feedback's), every hit has a keyword match, a cosine at or above the
    minimum, or a feedback word: an entry with none of these is never recalled, and every
    entry with a keyword match or a cosine over the minimum is (the limit not reached, no
    repeats in the corpus: distinct texts, distinct vectors)."""
    index = IndexSnapshot()
    corpus = [  # each its own axis besides a shared one: no two are near-duplicates
        (
            replace(entry(f"e{n}", text), date=f"2023-05-{10 + n}T10:00:00+00:00"),
            (unit_vector(axis_of, 18) * 0.6 + unit_vector(6 + n, 18) * 0.8).astype(np.float32),
        )
        for n, (text, axis_of) in enumerate(zip(texts, vectors, strict=False))
    ]
    index.upsert(corpus)
    period = (Period(date(2023, 5, 1), date(2023, 5, 31)),) if with_period else ()
    part = SearchQuery(
        vector=unit_vector(part_axis, 18),
        terms=keyword_terms(" ".join(part_words)),
        min_score=min_score,
        nearest=3,
        periods=period,
    )
    message = SearchQuery(
        vector=unit_vector(axis, 18),
        terms=keyword_terms(" ".join(asked)),
        min_score=min_score,
        periods=period,
        parts=(part,),
        limit=100,
    )
    hits = search(index, message)
    assert all(h.keyword > 0 or h.dense >= min_score or h.feedback > 0 for h in hits)
    found: set[str] = set()
    for probe in (message, part):
        dense = index.dense_scores(probe.vector)  # type: ignore[arg-type]
        keyword = index.keyword_scores(probe.terms)
        rows = np.flatnonzero((dense >= min_score) | (keyword > 0)).tolist()
        found |= {index.entries[r].id for r in rows}
    repeats = {n for n, t in enumerate(texts) if any(t in o for m, o in enumerate(texts) if m != n)}
    assert found - {f"e{n}" for n in repeats} <= {h.entry.id for h in hits}
