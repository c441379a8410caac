"""Embeddings as the search holds them: unit vectors in single precision, and dot
products of half-precision rows (what the index stores)."""

from __future__ import annotations

import numkong
import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


HalfVectors = npt.NDArray[np.float16]


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


def half_products(rows: HalfVectors, query: HalfVectors) -> Vector:
    """The dot product of each of ``rows`` with ``query``, both in half precision, summed
    in single precision (NumKong's SIMD kernels: numpy has none for half precision).

    Half precision is what the index stores (``redis_recall_index._pack``), so the copy
    loses nothing by keeping it, and it halves what a search reads: at 10,000 entries
    (34,050 embeddings of 384 values) 26 MB instead of 52, under this machine's 32 MB
    cache, where the single-precision matrix pushed everything else out of it (the query's
    model, the entries the collapse reads next). The query rounded to half precision moves
    a cosine by ~2e-4 at most (docs/benchmarks-notebook.md)."""
    return np.asarray(numkong.inner(query, rows, out_dtype="float32"), dtype=np.float32)


def support(query: Vector) -> slice:
    """The columns from the first to the last non-zero value of ``query``: the only ones a
    product with it needs. A query of the default embedder is zero outside its model's
    block (``adapters/script_embedder.py``), so an English query reads the English block of
    each embedding only: 384 of 896 columns."""
    nonzero = np.flatnonzero(query)
    return slice(int(nonzero[0]), int(nonzero[-1]) + 1) if nonzero.size else slice(0, 0)
