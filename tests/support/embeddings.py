"""A small, honest ``Embedder`` for tests: hashed bag of keyword terms.

Texts that share keyword terms get a high cosine, texts that share none get 0, so tests
can reason about dense similarity without a real model. Deterministic across processes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.ports import EmbeddingPurpose, Matrix

DIMENSION = 64


def hashed_vector(text: str, dimension: int = DIMENSION) -> Matrix:
    vector = np.zeros(dimension, dtype=np.float32)
    for term in keyword_terms(text):
        digest = hashlib.blake2b(term.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % dimension] += 1.0
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def hashed_vectors(entry: IndexEntry, dimension: int = DIMENSION) -> Matrix:
    """An index entry's embeddings as the indexer makes them: one row per text of
    ``entry.embedding_texts`` (its own first, then its sentences')."""
    return np.vstack([hashed_vector(text, dimension) for text in entry.embedding_texts])


class HashingEmbedder:
    """The ``Embedder`` port over :func:`hashed_vector`; counts its calls."""

    def __init__(self, name: str = "test-hashing", dimension: int = DIMENSION) -> None:
        self._name = name
        self._dimension = dimension
        self.calls: list[tuple[EmbeddingPurpose, int]] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        self.calls.append((purpose, len(texts)))
        if purpose == "across":  # one "model" for every text
            return np.zeros((len(texts), self._dimension), dtype=np.float32)
        return (
            np.vstack([hashed_vector(t, self._dimension) for t in texts])
            if texts
            else (np.zeros((0, self._dimension), dtype=np.float32))
        )

    async def aclose(self) -> None:
        return None
