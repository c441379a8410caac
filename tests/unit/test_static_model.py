"""Static embeddings distilled from the pinned MiniLM (``static_model.py``): what they give,
what they refuse, and the joint space they join (``LLM_BOT_EMBEDDING_MODEL``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llm_bot.adapters import multilingual_model, script_embedder, static_model
from llm_bot.config import ConfigurationError


def test_vectors_are_unit_length_and_zero_for_what_english_cannot_read() -> None:
    vectors = static_model.encode(["I bought a lemon cake.", "ฉันแพ้ถั่วลิสง", "", "ok"])
    assert vectors.shape == (4, static_model.DIMENSION)
    norms = np.linalg.norm(vectors, axis=1)
    np.testing.assert_allclose(norms[[0, 3]], 1.0, atol=1e-5)
    assert not vectors[1].any()
    assert not vectors[2].any()


def test_a_batch_gives_each_text_its_vector_alone() -> None:
    """Batched or one by one, the same vectors (no padding, no order effect)."""
    texts = [
        "My sister Anna moved to Lisbon last spring.",
        "yes",
        "We talked about a budget of 300 dollars for the party, and the cake.",
        "Where does my sister live?",
    ]
    together = static_model.encode(texts)
    alone = np.vstack([static_model.encode([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)
    np.testing.assert_allclose(static_model.encode(texts[::-1]), together[::-1], atol=1e-6)


def test_related_texts_are_closer_than_unrelated_ones() -> None:
    question, answer, other = static_model.encode(
        ["Where does my sister live?", "My sister lives in Lisbon now.", "I fixed the bike."]
    )
    assert float(question @ answer) > float(question @ other) + 0.1


def test_a_missing_or_foreign_table_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "table.npy"
    monkeypatch.setattr(static_model, "TABLE_FILE", table)
    monkeypatch.setattr(static_model, "ORIGIN_FILE", table.with_suffix(".json"))
    static_model.load_table.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match="missing"):
            static_model.load_table()
        rng = np.random.default_rng(1)
        np.save(table, rng.standard_normal((30522, static_model.DIMENSION)).astype(np.float16))
        table.with_suffix(".json").write_text(json.dumps({"model": "something else"}))
        with pytest.raises(ConfigurationError, match="another model"):
            static_model.load_table()
        table.with_suffix(".json").write_text(json.dumps(static_model._origin()))
        with pytest.raises(ConfigurationError, match="recipe's vectors"):
            static_model.load_table()
    finally:
        static_model.load_table.cache_clear()


async def test_the_static_joint_space_keeps_thai_on_the_multilingual_model() -> None:
    """``all-MiniLM-L6-v2-static+use-multilingual-v3``: English by the table, Thai by USE,
    each in its block; the ``across`` purpose reads English with USE."""
    embedder = script_embedder.local_embedder(script_embedder.STATIC_MODEL_NAME)
    english = static_model.DIMENSION
    try:
        assert embedder.name == script_embedder.STATIC_MODEL_NAME
        assert embedder.dimension == english + multilingual_model.DIMENSION
        passages = await embedder.embed(
            ["My cat is called Pomelo.", "ฉันแพ้ถั่วลิสง"], purpose="passage"
        )
        np.testing.assert_allclose(
            passages[0, :english], static_model.encode(["My cat is called Pomelo."])[0], atol=1e-6
        )
        assert not passages[0, english:].any()
        assert not passages[1, :english].any()
        assert passages[1, english:].any()
        (across,) = await embedder.embed(["What is my cat called?"], purpose="across")
        assert not across[:english].any()
        assert across[english:].any()
    finally:
        await embedder.aclose()
