"""Hybrid search over one user's index, in memory (SPEC 5.7). Pure: no I/O.

:class:`IndexSnapshot` holds a user's entries, their unit-length embeddings (rows of a
matrix per model's block of columns, ``_Embeddings``) and a keyword inverted index.
:func:`search` ranks the entries for a query twice:

- **dense**: cosine similarity of the query's embedding with each entry's, kept when at
  or above ``min_score`` (``LLM_BOT_RETRIEVAL_MIN_SCORE``). An entry of several sentences
  has an embedding per sentence besides its own (``IndexEntry.embedding_texts``) and
  scores the best of its cosines: passage-level evidence, the "MaxP" of Dai & Callan
  (SIGIR 2019), with sentences as the passages. A message about several things resembles
  none of them as a whole ("We went camping. The kids loved the meteor shower." barely
  resembles "Would she prefer a national park?"); its sentence about one of them does.
  Measured on the LoCoMo development data: evidence among the first 10 dense hits 46% →
  61% (first 50: 72% → 80%), see docs/benchmarks.md;
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
landlord). Measured on both development sets (docs/benchmarks.md): LoCoMo simulated
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
reuses the pieces: :func:`bm25_scores`, :func:`query_speakers`, :func:`speaker_ranking`,
:func:`feedback_asked`, :func:`feedback_candidates`, :func:`feedback_terms`, :func:`rank`,
:func:`fuse`, :func:`found_by`, :func:`found_cosines`, :func:`best_of` and
:func:`collapse`, so every index
fuses the same way.
"""

from __future__ import annotations

import bisect
import functools
import math
import sys
import typing
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

import numkong
import numpy as np
import numpy.typing as npt

from llm_bot.memory.keyword_matching import normalise
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_budget import RecalledCost
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.memory.time_expressions import Period

Vector = npt.NDArray[np.float32]
HalfVectors = npt.NDArray[np.float16]

BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60
NEAR_DUPLICATE = 0.95
"""Cosine at or above which two entries say the same thing."""
CANDIDATES_PER_RANKING = 200
"""How deep each ranking is read before fusion."""
FEEDBACK_ENTRIES = 10
"""The first fused entries whose words relevance feedback reads (``feedback_terms``)."""
FEEDBACK_TERMS = 10
"""The words relevance feedback adds to the query's."""
FEEDBACK_WEIGHT = 0.5
"""What an added word's BM25 counts for beside a word of the query. 10 entries, 10 words
and an even interpolation of the query with its expansion are RM3's usual settings
(Anserini's defaults), taken as they are, not fitted here (docs/benchmarks.md)."""


_normalised = functools.lru_cache(maxsize=16384)(normalise)
"""Texts compared for exact repeats (the same entries come back query after query)."""


def unit(vector: npt.ArrayLike) -> Vector:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


def unit_rows(vectors: npt.ArrayLike) -> Vector:
    """An entry's embeddings as a matrix of unit rows: a single vector becomes one row;
    the first row is the entry's own embedding, any others its sentences'."""
    array = np.asarray(vectors, dtype=np.float32)
    rows = array.reshape(1, -1) if array.ndim == 1 else array.reshape(array.shape[0], -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scaled: Vector = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return scaled


@dataclass(frozen=True)
class SearchQuery:
    """A query: its embedding (None when dense search is off), its keyword terms, the
    source ids to leave out, how many hits at most, and the dense minimum."""

    vector: Vector | None
    terms: Sequence[str]
    exclude: Collection[str] = frozenset()
    limit: int = 50
    min_score: float = 0.45
    periods: Sequence[Period] = ()
    """The periods the message names (``time_expressions.periods``)."""
    asks_when: bool = False
    """Whether the message asks when something happened."""
    max_tokens: int | None = None
    """Hits are kept while their lines cost at most this many tokens together
    (``recall_budget.within_tokens``), counted with ``token_count``; None: no bound."""
    token_count: Callable[[str], int] | None = field(default=None, compare=False)
    nearest: int = 0
    """The dense ranking holds at least this many nearest entries, whatever their cosine
    (the minimum still decides what counts as found)."""
    asker: str | None = None
    """The speaker the message names by speaking of its writer (the first person: the
    user's entries, ``first_person.asker_of``); None: it names nobody so."""
    parts: Sequence[SearchQuery] = ()
    """The questions of a message that asks several (``query_parts.py``), each searched
    on its own (its embedding, terms and time expressions), its rankings fused apart from
    the message's (``best_of``); an entry's fused, dense and keyword scores are its best
    over them."""


class IndexSnapshot:
    """One user's entries in memory, updated in place (upserts) and searched."""

    def __init__(self, dimension: int | None = None) -> None:
        self.dimension = dimension
        """Of every vector; taken from the first one when not given. A vector of another
        size is stored as zeros (it matches nothing)."""
        self._entries: list[IndexEntry] = []
        self._rows: dict[str, int] = {}
        self._sourced: dict[str, set[int]] = {}
        """Source id -> the rows of its entries (what a window's exclusion looks up)."""
        self._capacity = 0
        self._embeddings = _Embeddings(dimension or 0)
        self._floor: Vector = np.zeros(0, dtype=np.float32)
        """Each row's least dense score: 0 when one of its embeddings is zero (its cosine
        with anything), else -inf (its best cosine may be negative)."""
        self._postings: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[npt.NDArray[np.int64], Vector]] = {}
        """Postings searched before, as arrays of rows and term frequencies (what BM25
        reads: an array copy instead of a walk of the dict), with ``_appended``: the rows
        posted since. A row's removal drops its terms' arrays (rebuilt when next read)."""
        self._appended: dict[str, list[int]] = {}
        self._lengths: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        """Each row's length in keyword terms."""
        self._speaker_codes: dict[str, int] = {}
        self._speakers: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        """Each row's speaker, as its index in ``_speaker_codes``."""
        self._days: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        """Each row's date as a day number (``date.toordinal``; 0: none)."""
        self._dating: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        """Each row: whether its text says when something happened."""
        self._entry_bytes = 0
        """The entries' estimated bytes (``entry_bytes``) held, what ``nbytes`` adds to
        the arrays'."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """Embeddings held: one per entry plus its sentences' (what a copy costs)."""
        return self._embeddings.weight

    @property
    def nbytes(self) -> int:
        """An estimate of the memory this copy holds: its embeddings and arrays exactly,
        its entries by ``entry_bytes`` (what a byte budget on the copies counts)."""
        arrays = self._capacity * (4 + 4 + 4 + 4 + 1)
        return self._embeddings.nbytes + arrays + self._entry_bytes

    @property
    def entries(self) -> Sequence[IndexEntry]:
        return self._entries

    def get(self, entry_id: str) -> IndexEntry | None:
        row = self._rows.get(entry_id)
        return None if row is None else self._entries[row]

    def upsert(self, entries: Iterable[tuple[IndexEntry, Vector]]) -> None:
        """Add entries, or replace those with the same id (text, terms and vectors). Each
        comes with its embedding, or a matrix of them: its own, then its sentences'.

        Entries all new to the snapshot (a whole index loading) are added together: their
        embeddings scaled, placed and stored a matrix at a time (``_add_new``), not row by
        row: a cold load of a user's index costs a fraction of the time."""
        batch = list(entries)
        if len(batch) > 1 and self._all_new(batch):
            self._add_new(batch)
            return
        for entry, raw in batch:
            vectors = unit_rows(raw)
            if self.dimension is None:
                self.dimension = vectors.shape[1]
                self._embeddings = _Embeddings(self.dimension)
            if vectors.shape[1] != self.dimension:
                vectors = np.zeros((1, self.dimension), dtype=np.float32)
            row = self._rows.get(entry.id)
            if row is None:
                row = len(self._entries)
                self._rows[entry.id] = row
                self._entries.append(entry)
                self._grow(row + 1)
            else:
                self._unpost(row)
                self._unsource(row)
                self._entry_bytes -= entry_bytes(self._entries[row])
                self._entries[row] = entry
            self._entry_bytes += entry_bytes(entry)
            self._sourced.setdefault(entry.source_id, set()).add(row)
            zero = self._embeddings.put(row, vectors)
            self._floor[row] = 0.0 if zero else -np.inf
            self._speakers[row] = self._speaker_codes.setdefault(
                entry.speaker, len(self._speaker_codes)
            )
            self._days[row] = day_number(entry.date)
            self._dating[row] = entry.says_when
            self._post(row, entry.terms)

    def _all_new(self, batch: Sequence[tuple[IndexEntry, Vector]]) -> bool:
        ids = {entry.id for entry, _ in batch}
        return len(ids) == len(batch) and ids.isdisjoint(self._rows)

    def _add_new(self, batch: Sequence[tuple[IndexEntry, Vector]]) -> None:
        """``upsert`` of entries none of which the snapshot holds (ids distinct)."""
        matrices = [np.asarray(raw, dtype=np.float32) for _, raw in batch]
        matrices = [m.reshape(1, -1) if m.ndim == 1 else m for m in matrices]
        if self.dimension is None:
            self.dimension = matrices[0].shape[1]
            self._embeddings = _Embeddings(self.dimension)
        dimension = self.dimension
        matrices = [
            m if m.shape[1] == dimension else np.zeros((1, dimension), dtype=np.float32)
            for m in matrices
        ]
        first = len(self._entries)
        self._grow(first + len(batch))
        zero = self._embeddings.put_new(
            first, [len(m) for m in matrices], unit_rows(np.vstack(matrices))
        )
        rows = slice(first, first + len(batch))
        self._floor[rows] = np.where(zero, 0.0, -np.inf)
        codes = self._speaker_codes
        self._speakers[rows] = [codes.setdefault(e.speaker, len(codes)) for e, _ in batch]
        days: dict[str, int] = {}
        self._days[rows] = [
            days[e.date] if e.date in days else days.setdefault(e.date, day_number(e.date))
            for e, _ in batch
        ]
        self._dating[rows] = [e.says_when for e, _ in batch]
        for row, (entry, _) in enumerate(batch, start=first):
            self._rows[entry.id] = row
            self._entries.append(entry)
            self._entry_bytes += entry_bytes(entry)
            self._sourced.setdefault(entry.source_id, set()).add(row)
            self._post(row, entry.terms)

    def remove(self, entry_ids: Iterable[str]) -> int:
        """Drop entries (an unknown id is ignored); returns how many were dropped. The last
        row moves into each freed one, so the arrays stay dense and nothing is copied."""
        removed = 0
        for entry_id in entry_ids:
            row = self._rows.pop(entry_id, None)
            if row is None:
                continue
            removed += 1
            self._entry_bytes -= entry_bytes(self._entries[row])
            self._unpost(row)
            self._unsource(row)
            self._embeddings.drop(row)
            last = len(self._entries) - 1
            if row != last:
                moved = self._entries[last]
                self._unpost(last)
                self._unsource(last)
                self._sourced.setdefault(moved.source_id, set()).add(row)
                self._entries[row] = moved
                self._rows[moved.id] = row
                self._floor[row] = self._floor[last]
                self._speakers[row] = self._speakers[last]
                self._days[row] = self._days[last]
                self._dating[row] = self._dating[last]
                self._embeddings.move(last, row)
                self._post(row, moved.terms)
            self._entries.pop()
        return removed

    def _grow(self, rows: int) -> None:
        if rows > self._capacity:
            size = max(rows, 2 * self._capacity, 64)
            self._floor = _resized(self._floor, size)
            self._speakers = _resized(self._speakers, size)
            self._days = _resized(self._days, size)
            self._lengths = _resized(self._lengths, size)
            self._dating = _resized(self._dating, size)
            self._capacity = size

    def _post(self, row: int, terms: Sequence[str]) -> None:
        """``row``'s terms into the postings (the row has none there yet)."""
        postings = self._postings
        for term, count in Counter(terms).items():
            posting = postings.get(term)
            if posting is None:
                postings[term] = {row: count}
            else:
                posting[row] = count
        if self._arrays:
            for term in set(terms).intersection(self._arrays):
                self._appended.setdefault(term, []).append(row)
        self._lengths[row] = len(terms)

    def _unsource(self, row: int) -> None:
        source = self._entries[row].source_id
        rows = self._sourced.get(source)
        if rows is not None:
            rows.discard(row)
            if not rows:
                del self._sourced[source]

    def rows_of(self, source_ids: Iterable[str]) -> list[int]:
        """The rows of the entries of ``source_ids`` (each message's, each item's)."""
        return [row for source in source_ids for row in self._sourced.get(source, ())]

    def _unpost(self, row: int) -> None:
        for term in set(self._entries[row].terms):
            self._arrays.pop(term, None)
            self._appended.pop(term, None)
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(row, None)
                if not posting:
                    del self._postings[term]

    # -- scoring -------------------------------------------------------------------------

    def dense_scores(self, vector: Vector) -> Vector:
        """By row, the best cosine of ``vector`` with the entry's embeddings (its own and
        its sentences'); 0 for a vector of another size."""
        count = len(self._entries)
        query = unit(vector)
        if query.size != self.dimension or not query.any():
            return np.zeros(count, dtype=np.float32)
        return np.maximum(self._embeddings.best(query, count), self._floor[:count])

    @property
    def frequency(self) -> Mapping[str, int]:
        """How many entries hold each keyword term, by term (absent: none)."""
        return _Frequency(self._postings)

    def keyword_scores(self, terms: Sequence[str]) -> Vector:
        """BM25 of every entry for ``terms`` (a repeated query term counts once)."""
        count = len(self._entries)
        scores = np.zeros(count, dtype=np.float32)
        if count == 0:
            return scores
        lengths = self._lengths[:count]
        average = float(lengths.mean()) or 1.0
        for term in dict.fromkeys(terms):
            posting = self._posting(term)
            if posting is not None:
                rows, tf = posting
                scores[rows] += bm25(tf, lengths[rows], rows.size, count, average)
        return scores

    def _posting(self, term: str) -> tuple[npt.NDArray[np.int64], Vector] | None:
        """The rows holding ``term`` and how many times each does (None: no row does)."""
        posting = self._postings.get(term)
        if not posting:
            return None
        arrays = self._arrays.get(term)
        appended = self._appended.pop(term, None)
        if arrays is None:
            arrays = (
                np.fromiter(posting.keys(), dtype=np.int64, count=len(posting)),
                np.fromiter(posting.values(), dtype=np.float32, count=len(posting)),
            )
        elif appended:
            arrays = (
                np.concatenate([arrays[0], np.asarray(appended, dtype=np.int64)]),
                np.concatenate([arrays[1], [posting[row] for row in appended]]).astype(
                    np.float32, copy=False
                ),
            )
        self._arrays[term] = arrays
        return arrays

    def spoken_by(self, speakers: Collection[str]) -> npt.NDArray[np.bool_]:
        """By row: whether the entry's speaker is one of ``speakers``."""
        codes = [self._speaker_codes[s] for s in speakers if s in self._speaker_codes]
        return np.isin(self._speakers[: len(self._entries)], codes)

    def dated_within(self, periods: Sequence[Period]) -> npt.NDArray[np.bool_]:
        """By row: whether the entry's date falls in one of ``periods``."""
        return days_within(self._days[: len(self._entries)], periods)

    @property
    def dating(self) -> npt.NDArray[np.bool_]:
        """By row: whether the entry's text says when something happened."""
        return self._dating[: len(self._entries)]

    @property
    def speakers(self) -> Collection[str]:
        """Every speaker with an entry."""
        return self._speaker_codes.keys()

    def vector(self, entry_id: str) -> Vector | None:
        """The entry's own embedding (not its sentences'): zeros when it has none."""
        row = self._rows.get(entry_id)
        if row is None:
            return None
        part, start = self._embeddings.own(row)
        whole = np.zeros(self.dimension or 0, dtype=np.float32)
        whole[start : start + part.size] = part
        return whole

    def own_vectors(self, rows: Sequence[int]) -> list[tuple[Vector, int]]:
        """The own embedding of the entry at each of ``rows`` within its block, in single
        precision, and the column it starts at (empty when it is zero): what the collapse
        compares (``collapse``), gathered by block in one copy each."""
        return self._embeddings.own_many(rows)


class _Frequency(Mapping[str, int]):
    """How many entries hold a term: its posting's length (a view, no copy)."""

    def __init__(self, postings: Mapping[str, Mapping[int, int]]) -> None:
        self._postings = postings

    def __getitem__(self, term: str) -> int:
        return len(self._postings[term])

    def __iter__(self) -> Iterator[str]:
        return iter(self._postings)

    def __len__(self) -> int:
        return len(self._postings)


_Array = typing.TypeVar("_Array", bound=np.ndarray)


ENTRY_OVERHEAD = 600
"""Bytes an entry costs beyond its text and terms: its object, ids and the snapshot's
maps. These constants were measured with tracemalloc on LongMemEval messages loaded as
the Redis index loads them, and rounded up."""
TERM_BYTES = 62
"""Bytes a keyword term costs in its entry: its own string and the tuple's pointer."""
POSTING_BYTES = 95
"""Bytes a distinct term of an entry costs in the postings (its row's count)."""


def entry_bytes(entry: IndexEntry) -> int:
    """An estimate of what ``entry`` costs in a snapshot, besides its embeddings."""
    terms = entry.terms
    return (
        sys.getsizeof(entry.text)
        + TERM_BYTES * len(terms)
        + POSTING_BYTES * len(set(terms))
        + ENTRY_OVERHEAD
    )


def _resized(array: _Array, size: int) -> _Array:
    bigger = np.zeros(size, dtype=array.dtype)
    bigger[: len(array)] = array
    return typing.cast(_Array, bigger)


Columns = tuple[int, int]
"""A block of columns, ``(start, stop)``."""


class _Embeddings:
    """The embeddings of a snapshot's entries, each entry's own first, then its
    sentences', kept by block: a row that is zero outside a block of columns (one model's
    part of a joint space, ``adapters/script_embedder.py``: 384 columns for English, 512
    for other scripts) is stored at that width in the block's own matrix. A query reads only
    the blocks its own non-zero columns reach, each as one contiguous matrix (an English
    query: the English rows, 384 columns wide), and the copy holds no zeros. Zero rows are
    counted, not stored (their cosine is 0: ``IndexSnapshot._floor``). Values are kept in
    half precision, as the index stores them (``_products``)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.weight = 0
        """Embeddings held, zero ones included."""
        self._blocks: dict[Columns, _Block] = {}
        self._of: dict[int, dict[Columns, range]] = {}
        """Entry row -> its rows in each block it has rows in."""
        self._own: dict[int, Columns] = {}
        """Entry row -> the block of its own embedding (the first of its rows there);
        absent when that embedding is zero."""
        self._count: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return sum(block.matrix.nbytes + block.owner.nbytes for block in self._blocks.values())

    def put(self, entry_row: int, vectors: Vector) -> bool:
        """``vectors`` (unit rows, the entry's own first) become ``entry_row``'s embeddings;
        returns whether one of them is zero."""
        self.drop(entry_row)
        keys = [self._block_of(columns) for columns in _nonzero_columns(vectors)]
        spans: dict[Columns, range] = {}
        for key in dict.fromkeys(k for k in keys if k is not None):
            block = self._blocks.get(key)
            if block is None:
                block = self._blocks[key] = _Block(key)
            elif block.wasteful():
                self._compact(block)
            rows = vectors[[i for i, k in enumerate(keys) if k == key]]
            spans[key] = block.append(entry_row, rows)
        if spans:
            self._of[entry_row] = spans
        if keys[0] is not None:
            self._own[entry_row] = keys[0]
        self._count[entry_row] = len(vectors)
        self.weight += len(vectors)
        return None in keys

    def put_new(self, first: int, counts: Sequence[int], vectors: Vector) -> npt.NDArray[np.bool_]:
        """``put`` for entry rows ``first``, ``first + 1``, ... that hold no embeddings:
        ``counts[i]`` rows of ``vectors`` (unit rows, in order) are entry ``first + i``'s.
        Each block receives its rows in one copy. Returns, by entry, whether one of its
        embeddings is zero."""
        keys = [self._block_of(columns) for columns in _nonzero_columns(vectors)]
        owners = np.repeat(np.arange(first, first + len(counts)), counts)
        for key in dict.fromkeys(k for k in keys if k is not None):
            block = self._blocks.get(key)
            if block is None:
                block = self._blocks[key] = _Block(key)
            elif block.wasteful():
                self._compact(block)
            chosen = np.fromiter((k == key for k in keys), dtype=np.bool_, count=len(keys))
            start = block.filled
            block.append_rows(owners[chosen], vectors[chosen])
            for offset, run in _runs(owners[chosen]):
                self._of.setdefault(run, {})[key] = range(start + offset[0], start + offset[1])
        zero = np.zeros(len(counts), dtype=np.bool_)
        position = 0
        for index, count in enumerate(counts):
            row = first + index
            own = keys[position]
            if own is not None:
                self._own[row] = own
            zero[index] = any(k is None for k in keys[position : position + count])
            self._count[row] = count
            position += count
        self.weight += len(keys)
        return zero

    def drop(self, entry_row: int) -> None:
        for key, span in self._of.pop(entry_row, {}).items():
            self._blocks[key].orphan(span)
        self._own.pop(entry_row, None)
        self.weight -= self._count.pop(entry_row, 0)

    def move(self, from_row: int, to_row: int) -> None:
        """The embeddings of entry row ``from_row`` now belong to ``to_row`` (which has
        none)."""
        spans = self._of.pop(from_row, None)
        if spans is not None:
            for key, span in spans.items():
                self._blocks[key].owner[span.start : span.stop] = to_row
            self._of[to_row] = spans
        if (own := self._own.pop(from_row, None)) is not None:
            self._own[to_row] = own
        if (count := self._count.pop(from_row, None)) is not None:
            self._count[to_row] = count

    def best(self, query: Vector, count: int) -> Vector:
        """By entry row (``count`` of them), its best cosine with ``query`` (a unit vector,
        not all zeros); -inf where it has no non-zero embedding. The rows of a block the
        query does not reach score 0 without a product."""
        reach = support(query)
        half = query.astype(np.float16)
        pooled = np.full(count + 1, -np.inf, dtype=np.float32)  # orphans (owner -1) land last
        for block in self._blocks.values():
            if block.live == 0:
                continue
            starts, owners = block.runs()
            low, high = max(reach.start, block.start), min(reach.stop, block.stop)
            if low >= high:
                pooled[owners] = np.maximum(pooled[owners], np.float32(0))
                continue
            columns = slice(low - block.start, high - block.start)
            products = _products(block.matrix[: block.filled, columns], half[low:high])
            # An entry's rows in a block are one run, so its best is its run's maximum and
            # no owner but -1 repeats: a plain assignment (``np.maximum.at``: 2x the time).
            pooled[owners] = np.maximum(pooled[owners], np.maximum.reduceat(products, starts))
        return pooled[:-1]

    def own(self, entry_row: int) -> tuple[HalfVectors, int]:
        """The entry's own embedding within its block (a view, in half precision), and the
        block's first column (an empty vector when it is zero)."""
        key = self._own.get(entry_row)
        if key is None:
            return np.zeros(0, dtype=np.float16), 0
        block = self._blocks[key]
        return block.matrix[self._of[entry_row][key].start], block.start

    def own_many(self, entry_rows: Sequence[int]) -> list[tuple[Vector, int]]:
        """``own`` of each of ``entry_rows`` in single precision, gathered from each block
        at once (a row of its block's matrix each: an empty vector when it is zero)."""
        found: list[tuple[Vector, int]] = [(_EMPTY, 0)] * len(entry_rows)
        wanted: dict[Columns, tuple[list[int], list[int]]] = {}
        for position, entry_row in enumerate(entry_rows):
            key = self._own.get(entry_row)
            if key is not None:
                places, rows = wanted.setdefault(key, ([], []))
                places.append(position)
                rows.append(self._of[entry_row][key].start)
        for key, (places, rows) in wanted.items():
            block = self._blocks[key]
            gathered = block.matrix[rows].astype(np.float32)
            for place, vector in zip(places, gathered, strict=True):
                found[place] = (vector, block.start)
        return found

    def _block_of(self, columns: Columns | None) -> Columns | None:
        """The block for a row with values in ``columns``: its own, or one that holds them
        and is at most a tenth (or two columns) wider (a row of one model whose first or last value happens
        to be 0 joins its model's block rather than starting one; an English row does not
        join a block of rows that span both models)."""
        if columns is None or columns in self._blocks:
            return columns
        width = columns[1] - columns[0]
        holding = [
            k
            for k in self._blocks
            if k[0] <= columns[0]
            and columns[1] <= k[1]
            and k[1] - k[0] - width <= max(2, width // 10)
        ]
        return min(holding, key=lambda k: k[1] - k[0], default=columns)

    def _compact(self, block: _Block) -> None:
        for owner, span in block.compact().items():
            self._of[owner][(block.start, block.stop)] = span


_EMPTY: Vector = np.zeros(0, dtype=np.float32)


def _runs(owners: npt.NDArray[np.int64]) -> Iterator[tuple[tuple[int, int], int]]:
    """Each run of one owner in ``owners``: ((start, stop), owner)."""
    if owners.size == 0:
        return
    starts = np.flatnonzero(np.diff(owners, prepend=owners[:1] - 1)).tolist()
    stops = [*starts[1:], int(owners.size)]
    for start, stop in zip(starts, stops, strict=True):
        yield (start, stop), int(owners[start])


def _nonzero_columns(vectors: Vector) -> list[Columns | None]:
    """Each row's columns from its first to its last non-zero value (None: all zero)."""
    nonzero = vectors != 0
    first = nonzero.argmax(axis=1).tolist()
    stop = (vectors.shape[1] - nonzero[:, ::-1].argmax(axis=1)).tolist()
    return [
        (start, end) if any_ else None
        for start, end, any_ in zip(first, stop, nonzero.any(axis=1).tolist(), strict=True)
    ]


class _Block:
    """The rows of one block of columns, at that width, each with the entry row it belongs
    to, in half precision (``_products``). Replaced rows are orphaned (owner -1) and
    compacted away once they are the majority, so an append never copies the whole
    matrix."""

    def __init__(self, columns: Columns) -> None:
        self.start, self.stop = columns
        self.matrix: HalfVectors = np.zeros((0, self.stop - self.start), dtype=np.float16)
        self.owner: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.filled = 0
        self.live = 0

    def wasteful(self) -> bool:
        return self.filled - self.live > max(64, self.filled // 2)

    def runs(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        """Where each run of rows of one owner starts, and its owner: an entry's rows are
        one run (``append``; ``compact`` keeps their order), orphaned rows (owner -1) may
        be several runs."""
        owners = self.owner[: self.filled]
        starts = np.flatnonzero(np.diff(owners, prepend=owners[:1] - 1))
        return starts, owners[starts]

    def append(self, entry_row: int, vectors: Vector) -> range:
        start = self.filled
        self.append_rows(np.full(len(vectors), entry_row, dtype=np.int64), vectors)
        return range(start, self.filled)

    def append_rows(self, owners: npt.NDArray[np.int64], vectors: Vector) -> None:
        """Rows of several entries at once (``owners``: each row's entry row), each entry's
        rows together: its run."""
        start, end = self.filled, self.filled + len(vectors)
        if end > self.matrix.shape[0]:
            size = max(end, 2 * self.matrix.shape[0], 64)
            matrix = np.zeros((size, self.matrix.shape[1]), dtype=np.float16)
            matrix[:start] = self.matrix[:start]
            self.matrix = matrix
            owner = np.full(size, -1, dtype=np.int64)
            owner[:start] = self.owner[:start]
            self.owner = owner
        self.matrix[start:end] = vectors[:, self.start : self.stop]
        self.owner[start:end] = owners
        self.filled, self.live = end, self.live + len(vectors)

    def orphan(self, span: range) -> None:
        self.owner[span.start : span.stop] = -1
        self.live -= len(span)

    def compact(self) -> dict[int, range]:
        """Drops the orphaned rows; returns where each owner's rows are now."""
        keep = np.flatnonzero(self.owner[: self.filled] >= 0)
        self.matrix[: keep.size] = self.matrix[keep]
        self.owner[: keep.size] = self.owner[keep]
        self.owner[keep.size : self.filled] = -1
        self.filled = int(keep.size)
        spans: dict[int, range] = {}
        for position, owner in enumerate(self.owner[: self.filled].tolist()):
            span = spans.get(owner)
            spans[owner] = range(span.start if span else position, position + 1)
        return spans


def _products(rows: HalfVectors, query: HalfVectors) -> Vector:
    """The dot product of each of ``rows`` with ``query``, both in half precision, summed
    in single precision (NumKong's SIMD kernels: numpy has none for half precision).

    Half precision is what the index stores (``redis_recall_index._pack``), so the copy
    loses nothing by keeping it, and it halves what a search reads: at 10,000 entries
    (34,050 embeddings of 384 values) 26 MB instead of 52, under this machine's 32 MB
    cache, where the single-precision matrix pushed everything else out of it (the query's
    model, the entries the collapse reads next). The query rounded to half precision moves
    a cosine by ~2e-4 at most (docs/benchmarks.md)."""
    return np.asarray(numkong.inner(query, rows, out_dtype="float32"), dtype=np.float32)


def support(query: Vector) -> slice:
    """The columns from the first to the last non-zero value of ``query``: the only ones a
    product with it needs. A query of the default embedder is zero outside its model's
    block (``adapters/script_embedder.py``), so an English query reads the English block of
    each embedding only: 384 of 896 columns."""
    nonzero = np.flatnonzero(query)
    return slice(int(nonzero[0]), int(nonzero[-1]) + 1) if nonzero.size else slice(0, 0)


def bm25(tf: Vector, lengths: Vector, df: int, count: int, average: float) -> Vector:
    """One query term's BM25 contribution to the entries that hold it ``tf`` times, among
    ``count`` entries (``df`` of them holding it) of ``lengths`` terms, ``average`` on
    average."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / average)
    return (idf(df, count) * tf * (BM25_K1 + 1) / (tf + norm)).astype(np.float32, copy=False)


def idf(df: int, count: int) -> float:
    """BM25's inverse document frequency of a term ``df`` of ``count`` entries hold (the
    Lucene form: never negative)."""
    return math.log(1 + (count - df + 0.5) / (df + 0.5))


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


def days_within(days: npt.NDArray[np.int32], periods: Sequence[Period]) -> npt.NDArray[np.bool_]:
    """By day number (``day_number``; 0: no date, in no period): whether it falls in one of
    ``periods``."""
    inside = np.zeros(days.size, dtype=np.bool_)
    for period in periods:
        inside |= (days >= period.first.toordinal()) & (days <= period.last.toordinal())
    return inside


def day_number(created_at: str) -> int:
    """The day of an ISO date or timestamp as ``date.toordinal`` (its own UTC offset's day);
    0 when it is not one."""
    try:
        return date.fromisoformat(created_at[:10]).toordinal()
    except ValueError:
        return 0


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


def collapse(candidates: Iterable[Candidate], query: SearchQuery) -> list[SearchHit]:
    """Hits from fused candidates (best first), at most ``query.limit`` and within
    ``query.max_tokens``: a candidate whose normalised text repeats a kept one
    (``KeptTexts``), or (dense search on) whose embedding has cosine >= ``NEAR_DUPLICATE``
    with a kept one, is left out. Reads ``candidates`` only as far as it needs, and the hits
    of a prefix of them are a prefix of the hits of all."""
    return collapse_within(candidates, query)[0]


def collapse_within(
    candidates: Iterable[Candidate], query: SearchQuery
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


QUOTED_SHARE = 0.9
"""A text that holds a kept one (or is held by it) and is at most this much longer (or
shorter) repeats it: "echo: X" and "X", a reply quoting the message it answers."""


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
