"""One user's index in memory (``IndexSnapshot``): the entries, their embeddings
(``embedding_blocks``), a keyword inverted index and what each entry costs in bytes (what
the copies' byte budget counts). Pure: no I/O; :func:`hybrid_search.search` searches it."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from llm_bot.memory.embedding_blocks import EmbeddingBlocks, resized
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.scoring import bm25, day_number, days_within
from llm_bot.memory.time_expressions import Period
from llm_bot.memory.vectors import Vector, unit, unit_rows


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
        self._embeddings = EmbeddingBlocks(dimension or 0)
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
                self._embeddings = EmbeddingBlocks(self.dimension)
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
            self._embeddings = EmbeddingBlocks(self.dimension)
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
            self._floor = resized(self._floor, size)
            self._speakers = resized(self._speakers, size)
            self._days = resized(self._days, size)
            self._lengths = resized(self._lengths, size)
            self._dating = resized(self._dating, size)
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
