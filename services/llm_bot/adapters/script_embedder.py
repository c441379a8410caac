"""The default local embedder: English text by all-MiniLM-L6-v2, the rest multilingual.

Each text is embedded by one of two models, by what it is written in:

- text the English model reads (``local_embedder.readable``: less than half of its
  letters outside the Latin script) by all-MiniLM-L6-v2, as before: English recall is the
  same, vector for vector;
- text it cannot read (Thai, and other scripts its vocabulary lacks) by the Universal
  Sentence Encoder Multilingual (``multilingual_model.py``).

The two models' vectors live in one space of ``384 + 512`` dimensions, each model in its
own block (an English text's vector is zero in the multilingual block, and the reverse):
the cosine of two texts of the same model is that model's cosine, and of texts of
different models 0, so vectors of the two models are never compared with each other
(their cosines mean different things) and no other part of the service needs to know
there are two. A query is embedded the same way: a Thai question is compared with Thai
messages, an English one with English messages. In a conversation of both scripts, an
English question is also embedded by the multilingual model (the ``across`` purpose,
``encode_across``) and compared with the messages in other scripts, so "what is my
name?" finds "ฉันชื่อแอนนะคะ". The reverse cannot be: the English model does not read Thai,
and English messages have no multilingual vector (a Thai question about them is found by
its keywords, names and numbers, or the user's facts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from llm_bot.adapters import local_embedder as english_model
from llm_bot.adapters import multilingual_model, static_model
from llm_bot.adapters.local_embedder import LocalEmbedder
from llm_bot.config import ConfigurationError
from llm_bot.ports import Matrix

MODEL_NAME = "all-MiniLM-L6-v2+use-multilingual-v3"
"""What ``LLM_BOT_EMBEDDING_MODEL`` names (the default) and the vectors are stored with."""
STATIC_MODEL_NAME = f"{static_model.MODEL_NAME}+{multilingual_model.MODEL_ID}"
"""English by the static table distilled from all-MiniLM-L6-v2 (``static_model.py``), the
rest by the multilingual model: what ``LLM_BOT_EMBEDDING_MODEL`` names for the fast memory
formation (docs/benchmarks-notebook.md, "Memory formation at 10x")."""
ENGLISH = english_model.DIMENSION
DIMENSION = ENGLISH + multilingual_model.DIMENSION


def joint_encoder(
    english_encode: Callable[[Sequence[str]], Matrix], english_dimension: int
) -> Callable[[Sequence[str]], Matrix]:
    """``encode`` of the joint space whose English block is ``english_encode``'s."""
    dimension = english_dimension + multilingual_model.DIMENSION

    def encode(texts: Sequence[str]) -> Matrix:
        """Each text's vector in the joint space (synchronous; CPU-bound)."""
        vectors = np.zeros((len(texts), dimension), dtype=np.float32)
        if not texts:
            return vectors
        readable = [english_model.readable(text) for text in texts]
        english = [n for n, ok in enumerate(readable) if ok]
        other = [n for n, ok in enumerate(readable) if not ok and texts[n].strip()]
        if english:
            vectors[english, :english_dimension] = english_encode([texts[n] for n in english])
        if other:
            vectors[other, english_dimension:] = multilingual_model.encode(
                [texts[n] for n in other]
            )
        return vectors

    return encode


def across_encoder(english_dimension: int) -> Callable[[Sequence[str]], Matrix]:
    """``encode_across`` of the joint space whose English block is ``english_dimension``
    wide."""
    dimension = english_dimension + multilingual_model.DIMENSION

    def encode_across(texts: Sequence[str]) -> Matrix:
        vectors = np.zeros((len(texts), dimension), dtype=np.float32)
        english = [n for n, text in enumerate(texts) if english_model.readable(text)]
        if english:
            vectors[english, english_dimension:] = multilingual_model.encode(
                [texts[n] for n in english]
            )
        return vectors

    return encode_across


encode = joint_encoder(english_model.encode, ENGLISH)
"""Each text's vector in the joint space (synchronous; CPU-bound)."""


def encode_across(texts: Sequence[str]) -> Matrix:
    """Each query's vector for the texts of the other model (the ``across`` purpose): a
    text the English model reads by the multilingual one, in its block, to be compared
    with messages in other scripts (USE Multilingual maps a sentence and its translation
    close: cosine 0.55-0.62 between the Thai planted facts and English questions about
    them, docs/benchmarks-notebook.md); zeros for any other text (the English model cannot read
    it, so nothing in its block can be compared with it)."""
    return _across_default(texts)


_across_default = across_encoder(ENGLISH)


def local_embedder(model: str | None) -> LocalEmbedder:
    """The local model named by ``LLM_BOT_EMBEDDING_MODEL``: by default the two models of
    this module; ``all-MiniLM-L6-v2`` for the English model alone (a smaller index and no
    dense recall of other scripts)."""
    if model in (None, "", MODEL_NAME):
        multilingual_model.check_files()  # a corrupt install fails at start
        embedder = LocalEmbedder(
            encoder=encode, across=encode_across, name=MODEL_NAME, dimension=DIMENSION
        )
        # The multilingual model loads on an embedder thread (~3 s) while the process
        # starts: start-up does not wait for it, and a Thai text asked for before it is
        # ready waits for that one load.
        embedder.preload(multilingual_model.load_model)
        return embedder
    if model == STATIC_MODEL_NAME:
        multilingual_model.check_files()
        static_model.load_table()  # a missing or foreign table fails at start
        embedder = LocalEmbedder(
            encoder=joint_encoder(static_model.encode, static_model.DIMENSION),
            across=across_encoder(static_model.DIMENSION),
            name=STATIC_MODEL_NAME,
            dimension=static_model.DIMENSION + multilingual_model.DIMENSION,
        )
        embedder.preload(multilingual_model.load_model)
        return embedder
    if model in (english_model.MODEL_NAME, english_model.INDEX_MODEL_ID):
        return LocalEmbedder()
    if model in (static_model.MODEL_NAME, static_model.INDEX_MODEL_ID):
        static_model.load_table()
        return LocalEmbedder(
            encoder=static_model.encode,
            name=static_model.INDEX_MODEL_ID,
            dimension=static_model.DIMENSION,
        )
    raise ConfigurationError(
        f"invalid configuration: LLM_BOT_EMBEDDING_MODEL: {model!r} is not a bundled local "
        f"model (available: {MODEL_NAME}, {english_model.MODEL_NAME}, {STATIC_MODEL_NAME}, "
        f"{static_model.MODEL_NAME}); for other "
        "models use LLM_BOT_EMBEDDINGS=openai"
    )
