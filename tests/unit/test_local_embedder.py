"""The bundled local embedding model: offline, unit vectors, and honest about what it
cannot read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from llm_bot.adapters import local_embedder
from llm_bot.adapters.local_embedder import DIMENSION, INDEX_MODEL_ID, LocalEmbedder, encode
from llm_bot.config import ConfigurationError
from llm_bot.errors import EmbeddingUnavailable
from llm_bot.ports import Matrix


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


async def test_passages_asked_for_meanwhile_go_together_in_the_next_call() -> None:
    """While one call runs, the passages asked for wait and are embedded in one call
    together (a bigger pool, less padding); each caller gets its own rows."""
    calls: list[list[str]] = []
    entered, release = threading.Event(), threading.Event()

    def encoder(texts: Sequence[str]) -> Matrix:
        calls.append(list(texts))
        if list(texts) == ["first"]:
            entered.set()
            release.wait(5)
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    embedder = LocalEmbedder(threads=1, encoder=encoder, dimension=2, warm_up=("x",))
    try:
        first = asyncio.create_task(embedder.embed(["first"], purpose="passage"))
        assert await asyncio.to_thread(entered.wait, 5)
        second = asyncio.create_task(embedder.embed(["a", "bb"], purpose="passage"))
        third = asyncio.create_task(embedder.embed(["ccc"], purpose="passage"))
        await asyncio.sleep(0.05)
        release.set()
        _, two, three = await asyncio.gather(first, second, third)
    finally:
        await embedder.aclose()
    assert calls[1:] == [["first"], ["a", "bb", "ccc"]]  # calls[0]: the warm-up
    assert two[:, 0].tolist() == [1.0, 2.0]
    assert three[:, 0].tolist() == [3.0]


async def test_a_failed_call_fails_every_passage_it_held() -> None:
    """The model failing is the port's EmbeddingUnavailable for each caller of the call."""
    failing = False

    def encoder(texts: Sequence[str]) -> Matrix:
        if failing:
            raise RuntimeError("onnxruntime failed")
        return np.ones((len(texts), 2), dtype=np.float32)

    embedder = LocalEmbedder(threads=1, encoder=encoder, dimension=2)
    failing = True
    try:
        results = await asyncio.gather(
            embedder.embed(["a"], purpose="passage"),
            embedder.embed(["b"], purpose="passage"),
            return_exceptions=True,
        )
    finally:
        await embedder.aclose()
    assert [type(r) for r in results] == [EmbeddingUnavailable, EmbeddingUnavailable]


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
