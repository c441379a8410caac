"""The bundled local embedding model: offline, unit vectors, and honest about what it
cannot read."""

from __future__ import annotations

import numpy as np
import pytest

from llm_bot.adapters import local_embedder
from llm_bot.adapters.local_embedder import DIMENSION, INDEX_MODEL_ID, LocalEmbedder, encode
from llm_bot.config import ConfigurationError


def test_related_sentences_are_close_and_unrelated_ones_far() -> None:
    """A question and the message that answers it score far above an unrelated one."""
    question, answer, other = encode(
        [
            "When did Caroline go to the LGBTQ support group?",
            "Caroline: I went to a LGBTQ support group yesterday.",
            "The weather forecast says rain in Bangkok.",
        ]
    )
    assert question.shape == (DIMENSION,)
    assert abs(float(np.linalg.norm(question)) - 1.0) < 1e-4
    assert float(question @ answer) > 0.6 > float(question @ other) + 0.3


def test_text_the_model_cannot_read_gets_the_zero_vector() -> None:
    """Thai without spaces is one [UNK] to this English model: no dense match at all
    (otherwise every Thai text would match every other with cosine 1)."""
    thai, paraphrase, mixed = encode(
        ["ราคาสินค้านี้เท่าไหร่ครับ", "วันนี้อากาศดีมาก", "ราคา of the blue kettle please"]
    )
    assert not thai.any()
    assert not paraphrase.any()
    assert abs(float(np.linalg.norm(mixed)) - 1.0) < 1e-4


def test_texts_embedded_together_get_the_vectors_they_get_alone() -> None:
    """Texts share inference calls by length, each call padded to its own longest: a text
    embedded among longer and shorter ones gets the vector it gets alone, in its place."""
    texts = [
        "Caroline: I went to a LGBTQ support group yesterday, and it was so powerful.",
        "Yes!",
        *(f"Sentence {n} about {'a long trip ' * (n % 9)}to the lake." for n in range(40)),
        "",
        "ราคาสินค้านี้เท่าไหร่ครับ",
    ]
    together = encode(texts)
    alone = np.vstack([encode([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert not together[-1].any()


async def test_the_port_embeds_off_the_event_loop() -> None:
    """The adapter answers through its worker thread, one row per text, and names its model."""
    embedder = LocalEmbedder()
    try:
        vectors = await embedder.embed(["hello", "world"], purpose="passage")
        empty = await embedder.embed([], purpose="query")
    finally:
        await embedder.aclose()
    assert vectors.shape == (2, DIMENSION)
    assert empty.shape == (0, DIMENSION)
    assert embedder.name == INDEX_MODEL_ID


async def test_passages_split_across_threads_come_back_in_order() -> None:
    """Many passages are embedded on one thread per share and reassembled in order: the
    same vectors as one call on one thread."""
    texts = [
        f"Message {n}: we talked about {'camping ' * (n % 7)}and the weather." for n in range(70)
    ]
    one, two = LocalEmbedder(threads=1), LocalEmbedder(threads=2)
    try:
        alone = await one.embed(texts, purpose="passage")
        split = await two.embed(texts, purpose="passage")
    finally:
        await one.aclose()
        await two.aclose()
    np.testing.assert_allclose(split, alone, atol=1e-5)
    np.testing.assert_allclose(split[3], encode([texts[3]])[0], atol=1e-5)


def test_a_model_file_that_is_not_the_pinned_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The digests are the project's own: a different file in the package is refused."""
    monkeypatch.setattr(local_embedder, "MODEL_SHA256", "0" * 64)
    local_embedder.load_model.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match="not the pinned file"):
            local_embedder.load_model()
    finally:
        monkeypatch.undo()
        local_embedder.load_model.cache_clear()
