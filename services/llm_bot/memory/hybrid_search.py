"""Hybrid search over one user's index, in memory (SPEC 5.7). Pure: no I/O.

``index_snapshot.IndexSnapshot`` holds a user's entries, their unit-length embeddings (rows
of a matrix per model's block of columns, ``embedding_blocks``) and a keyword inverted index.
:func:`search` ranks the entries for a query twice:

- **dense**: cosine similarity of the query's embedding with each entry's, kept when at
  or above ``min_score`` (``LLM_BOT_RETRIEVAL_MIN_SCORE``). An entry of several sentences
  has an embedding per sentence besides its own (``IndexEntry.embedding_texts``) and
  scores the best of its cosines: passage-level evidence, the "MaxP" of Dai & Callan
  (SIGIR 2019), with sentences as the passages. A message about several things resembles
  none of them as a whole ("We went camping. The kids loved the meteor shower." barely
  resembles "Would she prefer a national park?"); its sentence about one of them does.
  Measured on the LoCoMo development data: evidence among the first 10 dense hits 46% →
  61% (first 50: 72% → 80%), see docs/benchmarks-notebook.md;
- **keyword**: Okapi BM25 (k1 = 1.2, b = 0.75, the Lucene IDF ``ln(1 + (N - df + 0.5) /
  (df + 0.5))``) over the query's keyword terms (``keyword_terms.py``);

and, when the query names a speaker (a person whose words are indexed: "What did Melanie
paint?"), a third time: **keyword among what that speaker said**, the same BM25 scores
restricted to the entries of the speakers the query names (fielded search, the speaker
being the field). What a person said is the likeliest evidence for a question about them,
yet the name alone barely moves BM25: every entry of that speaker holds it, so its IDF is
low. A message in the first person names its writer, the asker (``SearchQuery.asker``,
``first_person.py``): "how many citrus fruits have I used?" is about what the user said,
and the user's entries join the named speakers'. The ranking is left out when it would
not differ from the keyword ranking (no speaker named, or every entry the keywords match
is a named speaker's). Then **relevance feedback**: the words the first fused entries
share (``feedback_terms``, RM3's expansion) join the query's in one more keyword ranking,
at half weight: the message that answers a question often shares no word with it but
shares words with the messages around the topic that the question does find ("how did
the move go?" finds messages about the new flat, whose words find the one about the
landlord). Measured on both development sets (docs/benchmarks-notebook.md): LoCoMo simulated
0.813 / 0.891 / 0.929 -> 0.830 / 0.905 / 0.944 at 1,000 / 2,000 / 4,000 tokens, multi-hop
most (0.715 -> 0.744 at 2,000); LongMemEval unchanged. The rankings are fused by
reciprocal rank fusion (``1 / (60 + rank)`` summed over the rankings that found the entry;
Cormack et al. 2009), which needs no calibration between a cosine and a BM25 score. The
fused score is scaled to [0, 1] (1 = first in every ranking). A message that asks several
questions has each question's rankings fused apart, an entry keeping its best fused score
over the message and its questions (``best_of``).
A place in a fused ranking is no reason of its own to recall an entry: RRF gives a list's
tenth entry its share whatever that list's score was. An entry is recalled only when a
score found it relevant (``found_by``): a keyword match or a cosine at or above the
minimum, of the message or of one of its questions (with that question's minimum), or
the words relevance feedback added. A question's nearest few under the minimum and the
entries a named period ranks by cosine alone still take their places in the fusion (the
others' fused scores are as before), but are not recalled for them, and feedback reads
the words of the first fused entries that a score found (else such an entry could find
itself by its own words).
Entries whose ``source_id`` is excluded (already in the window) never appear; an entry
whose text repeats one ranked higher (same normalised text, or cosine >= ``NEAR_DUPLICATE``)
collapses into it.

An index that ranks elsewhere (a vector engine's dense search, ``qdrant_recall_index.py``)
reuses the pieces (``ranking.py``: the rankings, their fusion, what counts as found;
``hit_collapse.py``: the hits), so every index fuses the same way.
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
