"""Hybrid search over one user's index, in memory (SPEC 5.7). Pure: no I/O.

``index_snapshot.IndexSnapshot`` holds a user's entries, their unit-length embeddings and a
keyword inverted index. :func:`search` ranks the entries for a query several ways and fuses
the rankings by reciprocal rank fusion (``ranking.py``):

- **dense**: the best cosine of the query with an entry's own embedding and its
  sentences' (a message about several things resembles one of them in one sentence), kept
  at or above ``LLM_BOT_RETRIEVAL_MIN_SCORE``;
- **keyword**: Okapi BM25 over the query's keyword terms;
- **the named speakers' words** (and the asker's, for a question in the first person):
  the same BM25 among their entries, when it differs from the keyword ranking;
- **relevance feedback**: the words the first fused entries share, at half weight;
- **time**: the entries within the periods the question names, and the dated ones for a
  when-question (``time_expressions.py``, ``scoring.py``).

A message that asks several questions has each one's rankings fused apart, an entry
keeping its best score. An entry is recalled only when a score found it relevant
(``found_by``), never on its place in a fusion alone. Entries already in the window are
left out; an entry that repeats one ranked higher collapses into it (``hit_collapse.py``).
An index that ranks elsewhere (Qdrant) reuses the same pieces. Why each ranking is there,
and what it gained on the development sets: docs/memory.md and
docs/benchmarks-notebook.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from llm_bot.memory.hit_collapse import Candidate, collapse
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.ranking import (
    CANDIDATES_PER_RANKING,
    FEEDBACK_ENTRIES,
    FEEDBACK_WEIGHT,
    best_of,
    feedback_asked,
    feedback_terms,
    found_by,
    found_cosines,
    fuse,
    query_speakers,
    rank,
    speaker_ranking,
    time_rankings,
)
from llm_bot.memory.recall_items import SearchHit
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector


def _ranked(
    snapshot: IndexSnapshot, query: SearchQuery, allowed: npt.NDArray[np.bool_]
) -> tuple[list[list[int]], list[list[int]], Vector, Vector]:
    """The dense and keyword rankings of ``query``, its time rankings, and its dense and
    keyword scores by row."""
    dense = np.zeros(len(snapshot), dtype=np.float32)
    rankings: list[list[int]] = []
    if query.vector is not None:
        dense = snapshot.dense_scores(query.vector)
        ranked = rank(dense, allowed & (dense >= query.min_score), CANDIDATES_PER_RANKING)
        if len(ranked) < query.nearest:
            ranked = rank(dense, allowed, query.nearest)
        rankings.append(ranked)
    keyword = snapshot.keyword_scores(query.terms)
    rankings.append(rank(keyword, allowed & (keyword > 0), CANDIDATES_PER_RANKING))
    return rankings, time_rankings(query, dense, keyword, allowed, snapshot), dense, keyword


def search(snapshot: IndexSnapshot, query: SearchQuery) -> list[SearchHit]:
    """The entries relevant to ``query``, best first (see the module docstring)."""
    count = len(snapshot)
    if count == 0 or query.limit <= 0:
        return []
    allowed = np.ones(count, dtype=np.bool_)
    allowed[snapshot.rows_of(query.exclude)] = False
    rankings, by_time, dense, keyword = _ranked(snapshot, query, allowed)
    relevant = found_by(dense, keyword, query)
    named = query_speakers(snapshot.speakers, query)
    if named:
        by_speaker = speaker_ranking(keyword, allowed, snapshot.spoken_by(named))
        if by_speaker is not None:
            rankings.append(by_speaker)
    rankings += by_time
    prefer = (found_cosines(dense, query), keyword)
    fused = [fuse(rankings, prefer)]
    added = np.zeros(count, dtype=np.float32)
    top = [(row, score) for row, score in fused[0] if relevant[row]][:FEEDBACK_ENTRIES]
    feedback = feedback_ranking(snapshot, query, top, keyword, allowed)
    if feedback is not None:
        ranking, added = feedback
        fused[0] = fuse([*rankings, ranking], prefer)
        relevant |= added > 0
    for part in query.parts:  # each question of a message that asks several, on its own
        part_rankings, part_by_time, part_dense, part_keyword = _ranked(snapshot, part, allowed)
        fused.append(
            fuse(part_rankings + part_by_time, (found_cosines(part_dense, part), part_keyword))
        )
        relevant |= found_by(part_dense, part_keyword, part)
        dense, keyword = np.maximum(dense, part_dense), np.maximum(keyword, part_keyword)
    ranked = [
        (row, score)
        for row, score in best_of(fused, (found_cosines(dense, query), keyword))
        if relevant[row]  # a place in a ranking alone is no reason to recall an entry
    ]
    rows = [row for row, _ in ranked]
    own = snapshot.own_vectors(rows)
    return collapse(
        (
            Candidate(
                snapshot.entries[row],
                score,
                cosine,
                bm25_score,
                *vector,
                vector_space=snapshot.dimension,
                feedback=feedback_score,
            )
            for (row, score), cosine, bm25_score, feedback_score, vector in zip(
                ranked,
                dense[rows].tolist(),
                keyword[rows].tolist(),
                added[rows].tolist(),
                own,
                strict=True,
            )
        ),
        query,
    )


def feedback_ranking(
    snapshot: IndexSnapshot,
    query: SearchQuery,
    fused: Sequence[tuple[int, float]],
    keyword: Vector,
    allowed: npt.NDArray[np.bool_],
) -> tuple[list[int], Vector] | None:
    """Relevance feedback's ranking: BM25 of the query's terms and, at
    ``FEEDBACK_WEIGHT``, of the words its first fused entries share (``feedback_terms``;
    ``fused``: those the query's scores found, ``found_by``: an entry a ranking only placed
    would otherwise find itself by its own words), with those words' BM25 by row (0 for
    rows not ``allowed``); None when they add no word."""
    top = [snapshot.entries[row] for row, _ in fused[:FEEDBACK_ENTRIES]]
    terms = feedback_terms(
        [entry.terms for entry in top],
        feedback_asked(query, (entry.speaker for entry in top)),
        snapshot.frequency,
        len(snapshot),
    )
    if not terms:
        return None
    added = np.where(allowed, snapshot.keyword_scores(terms), 0).astype(np.float32)
    scores = keyword + FEEDBACK_WEIGHT * added
    return rank(scores, allowed & (scores > 0), CANDIDATES_PER_RANKING), added
