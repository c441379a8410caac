"""The embeddings of a user's entries in memory: rows of a half-precision matrix per
model's block of columns (``EmbeddingBlocks``), each entry's rows one run, kept compact
as entries come and go."""

from __future__ import annotations

import typing
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from llm_bot.memory.vectors import HalfVectors, Vector, half_products, support

_Array = typing.TypeVar("_Array", bound=np.ndarray)


def resized(array: _Array, size: int) -> _Array:
    bigger = np.zeros(size, dtype=array.dtype)
    bigger[: len(array)] = array
    return typing.cast(_Array, bigger)


Columns = tuple[int, int]
"""A block of columns, ``(start, stop)``."""


class EmbeddingBlocks:
    """The embeddings of a snapshot's entries, each entry's own first, then its
    sentences', kept by block: a row that is zero outside a block of columns (one model's
    part of a joint space, ``adapters/script_embedder.py``: 384 columns for English, 512
    for other scripts) is stored at that width in the block's own matrix. A query reads only
    the blocks its own non-zero columns reach, each as one contiguous matrix (an English
    query: the English rows, 384 columns wide), and the copy holds no zeros. Zero rows are
    counted, not stored (their cosine is 0: ``IndexSnapshot._floor``). Values are kept in
    half precision, as the index stores them (``half_products``)."""

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
            products = half_products(block.matrix[: block.filled, columns], half[low:high])
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
    to, in half precision (``half_products``). Replaced rows are orphaned (owner -1) and
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
