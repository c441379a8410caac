"""Fused candidates collapsed into hits: repeats and near-duplicates of a kept hit left
out, hits kept while their lines fit the recall section's token bound.

Every search runs this over its fused ranking (the in-memory index, ``hybrid_search``,
and the Qdrant adapter), and with a 4,000-token recall section it reads ~200 candidates to
keep ~160 hits: per candidate it is the hottest loop of the reply path (issue 41). So
the work per candidate is a few dictionary lookups, and the vector products are done a
chunk of candidates at a time (one matrix product against the hits kept so far and one
within the chunk), not one product per candidate.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from llm_bot.memory.keyword_matching import normalise
from llm_bot.memory.recall_budget import RecalledCost
from llm_bot.memory.recall_items import IndexEntry, SearchHit

Vector = npt.NDArray[np.float32]

NEAR_DUPLICATE = 0.95
"""Cosine at or above which two entries say the same thing."""
QUOTED_SHARE = 0.9
"""A text that holds a kept one (or is held by it) and is at most this much longer (or
shorter) repeats it: "echo: X" and "X", a reply quoting the message it answers."""

_normalised = functools.lru_cache(maxsize=16384)(normalise)
"""Texts compared for exact repeats (the same entries come back query after query)."""


class CollapseQuery(Protocol):
    """What the collapse reads of a query (``search_query.SearchQuery``)."""

    @property
    def vector(self) -> Vector | None: ...
    @property
    def limit(self) -> int: ...
    @property
    def min_score(self) -> float: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def token_count(self) -> Callable[[str], int] | None: ...


@dataclass(frozen=True)
class Candidate:
    """A fused entry on its way to becoming a hit: its scaled fused score, cosine with the
    query (0 when not computed), BM25 score and unit embedding (None when unknown), whose
    values start at column ``vector_start`` (zero outside them: one model's block)."""

    entry: IndexEntry
    score: float
    dense: float
    keyword: float
    vector: Vector | None
    vector_start: int = 0
    vector_space: int | None = None
    """The dimension of the space the vector is part of (None: its own size); a vector of
    another space than the query's is never compared."""
    feedback: float = 0.0
    """BM25 of the words relevance feedback added (``feedback_terms``; 0: none matched)."""


def collapse(candidates: Iterable[Candidate], query: CollapseQuery) -> list[SearchHit]:
    """Hits from fused candidates (best first), at most ``query.limit`` and within
    ``query.max_tokens``: a candidate whose normalised text repeats a kept one
    (``KeptTexts``), or (dense search on) whose embedding has cosine >= ``NEAR_DUPLICATE``
    with a kept one, is left out. Reads ``candidates`` only as far as it needs, and the hits
    of a prefix of them are a prefix of the hits of all."""
    return collapse_within(candidates, query)[0]


def collapse_within(
    candidates: Iterable[Candidate], query: CollapseQuery
) -> tuple[list[SearchHit], bool]:
    """``collapse``, and whether its hits are all there can be: the limit reached, or the
    next one's line would not fit in the token bound (the first hit that does not fit ends
    them, as ``recall_budget.within_tokens`` does)."""
    hits: list[SearchHit] = []
    if query.limit <= 0:
        return hits, True
    width = query.vector.size if query.vector is not None else 0
    count = query.token_count if query.max_tokens is not None else None
    cost = RecalledCost(count) if count is not None else None
    spent = 0
    kept_texts = KeptTexts()
    kept: Vector | None = None  # the kept embeddings, one row each (one product per check)
    filled = 0
    for candidate in candidates:
        vector, start = candidate.vector, candidate.vector_start
        comparable = (
            vector is not None
            and vector.size > 0
            and (candidate.vector_space or vector.size) == width
            and start + vector.size <= width
        )
        if comparable and kept is not None and filled:  # one product: before the texts
            assert vector is not None  # noqa: S101  # comparable says so
            reach = kept[:filled, start : start + vector.size]
            if float((reach @ vector).max()) >= NEAR_DUPLICATE:
                continue
        text = _normalised(candidate.entry.text)
        if kept_texts.repeats(text):
            continue
        hit = SearchHit(
            entry=candidate.entry,
            score=candidate.score,
            dense=candidate.dense if candidate.dense >= query.min_score else 0.0,
            keyword=candidate.keyword,
            feedback=candidate.feedback,
        )
        if cost is not None and query.max_tokens is not None:
            spent += cost.of(hit)
            if spent > query.max_tokens:
                return hits, True
            cost.add(hit)
        kept_texts.add(text)
        if comparable:
            assert vector is not None  # noqa: S101  # comparable says so
            if kept is None:
                kept = np.zeros((query.limit, width), dtype=np.float32)
            kept[filled, start : start + vector.size] = vector
            filled += 1
        hits.append(hit)
        if len(hits) >= query.limit:
            return hits, True
    return hits, False


class KeptTexts:
    """The normalised texts of the hits kept so far, by length, to tell repeats: the same
    text, or one inside the other with the shorter at least ``QUOTED_SHARE`` of the longer.
    The speaker prefix an entry's embedding starts with keeps such a pair under
    ``NEAR_DUPLICATE`` (an echo of a Thai message: cosine 0.91), so the texts are compared
    too; only texts of comparable length are, so a check costs a few comparisons."""

    def __init__(self) -> None:
        self._exact: set[str] = set()
        self._by_length: list[tuple[int, str]] = []

    def repeats(self, text: str) -> bool:
        if text in self._exact:
            return True
        size = len(text)
        low = bisect.bisect_left(self._by_length, (math.ceil(QUOTED_SHARE * size), ""))
        high = bisect.bisect_right(self._by_length, (math.floor(size / QUOTED_SHARE), "\U0010ffff"))
        for length, other in self._by_length[low:high]:
            if (other in text) if length <= size else (text in other):
                return True
        return False

    def add(self, text: str) -> None:
        self._exact.add(text)
        bisect.insort(self._by_length, (len(text), text))
