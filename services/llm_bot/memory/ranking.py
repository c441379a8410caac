"""The rankings a search fuses, and their fusion: keyword (BM25), by speaker, by time,
relevance feedback's words, reciprocal rank fusion and the best of a message's
questions; what counts as found. The in-memory search (``hybrid_search``) and the Qdrant
adapter rank with these, so every index fuses the same way."""

from __future__ import annotations

import functools
import typing
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.scoring import bm25, idf
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector

RRF_K = 60


CANDIDATES_PER_RANKING = 200
"""How deep each ranking is read before fusion."""


FEEDBACK_ENTRIES = 10
"""The first fused entries whose words relevance feedback reads (``feedback_terms``)."""


FEEDBACK_TERMS = 10
"""The words relevance feedback adds to the query's."""


FEEDBACK_WEIGHT = 0.5
"""What an added word's BM25 counts for beside a word of the query. 10 entries, 10 words
and an even interpolation of the query with its expansion are RM3's usual settings
(Anserini's defaults), taken as they are, not fitted here (docs/benchmarks-notebook.md)."""


def feedback_asked(query: SearchQuery, speakers: Iterable[str]) -> set[str]:
    """The words relevance feedback does not add: the query's own, and the names of the
    ``speakers`` of its entries (an entry's terms lead with its speaker's name: a field,
    ranked apart, not a word of the text)."""
    return set(query.terms).union(*(_name_terms(speaker) for speaker in set(speakers)))


def feedback_terms(
    documents: Iterable[Sequence[str]],
    asked: Collection[str],
    frequency: Mapping[str, int],
    count: int,
) -> list[str]:
    """Relevance feedback's words: of the keyword terms of ``documents`` (the first
    fused entries, ``FEEDBACK_ENTRIES``), those not ``asked`` that two or more of them
    hold, weighted by how many hold each times its IDF among ``count`` entries
    (``frequency``: how many hold it), the ``FEEDBACK_TERMS`` heaviest (ties: in
    alphabetical order). The expansion of RM3 (Lavrenko & Croft 2001; Abdul-Jaleel et al.
    2004) with each document weighted alike: a word the best entries share is the topic's;
    a word of one entry alone is that entry's."""
    held = feedback_candidates(documents, asked)
    weight = {term: n * idf(frequency.get(term, 0), count) for term, n in held.items()}
    return sorted(weight, key=lambda term: (-weight[term], term))[:FEEDBACK_TERMS]


def feedback_candidates(documents: Iterable[Sequence[str]], asked: Collection[str]) -> Counter[str]:
    """The words relevance feedback may add (``feedback_terms``): those not ``asked``
    that two or more of ``documents`` hold, with how many hold each."""
    held = Counter(term for document in documents for term in set(document) if term not in asked)
    return Counter({term: n for term, n in held.items() if n >= 2})


def bm25_scores(
    documents: Sequence[Sequence[str]], terms: Sequence[str], *, count: int, average: float
) -> Vector:
    """BM25 of ``documents`` (keyword terms of entries) for ``terms`` (a repeated query
    term counts once), in an index of ``count`` entries of ``average`` length where the
    entries holding a query term are all among ``documents``: what an index that keeps
    the terms elsewhere fetched for a query."""
    scores = np.zeros(len(documents), dtype=np.float32)
    wanted = dict.fromkeys(terms)
    postings: dict[str, list[tuple[int, int]]] = {}
    for row, document in enumerate(documents):
        for term, frequency in Counter(t for t in document if t in wanted).items():
            postings.setdefault(term, []).append((row, frequency))
    lengths = np.fromiter((len(d) for d in documents), dtype=np.float32, count=len(documents))
    for posting in postings.values():
        rows = np.fromiter((row for row, _ in posting), dtype=np.int64, count=len(posting))
        tf = np.fromiter((f for _, f in posting), dtype=np.float32, count=len(posting))
        scores[rows] += bm25(tf, lengths[rows], len(posting), count, average or 1.0)
    return scores


@functools.lru_cache(maxsize=4096)
def _name_terms(speaker: str) -> frozenset[str]:
    return frozenset(keyword_terms(speaker))


def named_speakers(speakers: Iterable[str], terms: Collection[str]) -> set[str]:
    """The ``speakers`` the query names: one of the name's keyword terms is a query term
    ("Melanie's" names Melanie, as both stem to the same term)."""
    wanted = set(terms)
    return {s for s in speakers if s and not _name_terms(s).isdisjoint(wanted)}


def query_speakers(speakers: Iterable[str], query: SearchQuery) -> set[str]:
    """The ``speakers`` ``query`` names (``named_speakers``), and its asker when it speaks
    of its writer (``SearchQuery.asker``, whether or not among ``speakers``)."""
    named = named_speakers(speakers, query.terms)
    if query.asker:
        named.add(query.asker)
    return named


def speaker_ranking(
    keyword: Vector, keep: npt.NDArray[np.bool_], spoken: npt.NDArray[np.bool_]
) -> list[int] | None:
    """The keyword ranking among the rows ``spoken`` by a speaker the query names (and
    ``keep``); None when it would not differ from the keyword ranking itself (none of
    the rows the keywords match is such a speaker's, or all are)."""
    matched = keep & (keyword > 0)
    restricted = matched & spoken
    found = int(np.count_nonzero(restricted))
    if found == 0 or found == int(np.count_nonzero(matched)):
        return None
    return rank(keyword, restricted, CANDIDATES_PER_RANKING)


def restricted_ranking(
    scores: Vector, keep: npt.NDArray[np.bool_], inside: npt.NDArray[np.bool_]
) -> list[int] | None:
    """The ranking by ``scores`` of the rows ``keep`` and ``inside``; None when it would not
    differ from the ranking of all the ``keep`` rows (none of them inside, or all)."""
    restricted = keep & inside
    found = int(np.count_nonzero(restricted))
    if found == 0 or found == int(np.count_nonzero(keep)):
        return None
    return rank(scores, restricted, CANDIDATES_PER_RANKING)


def time_rankings(
    query: SearchQuery,
    dense: Vector,
    keyword: Vector,
    allowed: npt.NDArray[np.bool_],
    snapshot: IndexSnapshot,
) -> list[list[int]]:
    """The rankings a message's time adds (fielded search, the date being the field):

    - it names periods ("in May 2022", "last week"): the entries dated within them,
      ranked by cosine (by BM25 without an embedding), whatever the dense minimum: the
      message that answers "what did she do last week?" rarely says "last week";
    - it asks when: the entries whose text says when (``mentions_time``: "yesterday",
      "last Friday", a date) among those its keywords match, by BM25: the message that
      dates an event, besides the date it was written on."""
    rankings: list[list[int]] = []
    if query.periods:
        scores = dense if query.vector is not None else keyword
        keep = allowed if query.vector is not None else allowed & (keyword > 0)
        within = restricted_ranking(scores, keep, snapshot.dated_within(query.periods))
        if within is not None:
            rankings.append(within)
    if query.asks_when:
        dating = restricted_ranking(keyword, allowed & (keyword > 0), snapshot.dating)
        if dating is not None:
            rankings.append(dating)
    return rankings


def rank(scores: Vector, keep: npt.NDArray[np.bool_], depth: int) -> list[int]:
    """Rows with ``keep`` set, best score first (ties: lower row first), at most ``depth``."""
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return []
    order = np.lexsort((rows, -scores[rows]))
    return [int(r) for r in rows[order][:depth]]


def fuse(
    rankings: Sequence[Sequence[int]], prefer: Sequence[Vector] = ()
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of ``rankings`` (rows, best first): (row, fused score scaled
    to (0, 1], 1 = first in every ranking), best first. Ties (one ranking's second that is
    another's third, and the reverse) go to the higher value of the first of ``prefer``
    (scores by row: dense, then keyword) that differs, then to the lower row."""
    listed = [np.asarray(ranking, dtype=np.int64) for ranking in rankings if len(ranking)]
    if not listed:
        return []
    rows = np.concatenate(listed)
    shares = np.concatenate([1.0 / (RRF_K + np.arange(1, r.size + 1)) for r in listed])
    unique, inverse = np.unique(rows, return_inverse=True)
    fused = np.bincount(inverse, weights=shares)
    fused = np.round(fused, 12)  # a sum's last bits depend on its order; ties must be ties
    order = _best_first(unique, fused, prefer)
    best = len(rankings) / (RRF_K + 1)
    return [
        (int(row), min(1.0, float(score) / best))
        for row, score in zip(unique[order], fused[order], strict=True)
    ]


def found_by(dense: Vector, keyword: Vector, query: SearchQuery) -> npt.NDArray[np.bool_]:
    """By row: whether ``query``'s own scores found the entry relevant, a keyword match or
    a cosine at or above its minimum (a message's, or one of its questions' with that
    question's minimum). An entry that neither these nor relevance feedback's words found
    is not recalled: the nearest few a question's dense ranking holds whatever their
    cosine, and the entries a named period ranks by cosine, are placed in the fusion (they
    move the others' fused scores as before) but are no hits of their own. Rank fusion
    gives a place in a list a score whatever the list's own score was, so without this the
    prompt was padded with items no ranking found relevant (issue 41)."""
    if query.vector is None:
        return keyword > 0
    return (keyword > 0) | (dense >= query.min_score)


def found_cosines(dense: Vector, query: SearchQuery) -> Vector:
    """The cosines at or above the query's minimum, 0 elsewhere (as a vector engine
    reports them)."""
    return np.where(dense >= query.min_score, dense, 0)


def best_of(
    fused: Sequence[Sequence[tuple[int, float]]], prefer: Sequence[Vector] = ()
) -> list[tuple[int, float]]:
    """Fused rankings of one message merged: the message's own and each of its questions'
    (``fuse`` of each one's rankings), an entry scoring its best (CombMAX, Fox & Shaw
    1994), best first; ties as ``fuse`` breaks them (the first of ``prefer`` that differs,
    then the lower row). Each question of "what is my name, my order number and my
    budget?" brings its own best entries to the top, where one fusion of every question's
    rankings favoured entries that several questions find a little (the budget's fact
    ranked 27th in a Thai conversation, 4th fused this way)."""
    if len(fused) == 1:
        return list(fused[0])
    best: dict[int, float] = {}
    for ranking in fused:
        for row, score in ranking:
            if score > best.get(row, -1.0):
                best[row] = score
    if not best:
        return []
    rows = np.fromiter(best, dtype=np.int64, count=len(best))
    scores = np.fromiter(best.values(), dtype=np.float64, count=len(best))
    return [(int(rows[i]), float(scores[i])) for i in _best_first(rows, scores, prefer)]


def _best_first(
    rows: npt.NDArray[np.int64], scores: npt.NDArray[typing.Any], prefer: Sequence[Vector]
) -> npt.NDArray[np.intp]:
    """The order of ``rows`` by ``scores``, best first; ties to the higher value of the
    first of ``prefer`` (values by row) that differs, then to the lower row."""
    ties = [-np.asarray(values, dtype=np.float64)[rows] for values in reversed(prefer)]
    return np.lexsort((rows, *ties, -scores))
