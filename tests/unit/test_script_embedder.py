"""The default local embedder: English text by the English model as before, Thai (and
other scripts it cannot read) by the multilingual model, in blocks never compared."""

from __future__ import annotations

import numpy as np
import pytest

from llm_bot.adapters import local_embedder, multilingual_model, script_embedder
from llm_bot.adapters.script_embedder import DIMENSION, ENGLISH, MODEL_NAME, encode
from llm_bot.config import ConfigurationError


def test_english_text_keeps_the_english_models_vector() -> None:
    """English recall is unchanged: the English block is the English model's vector."""
    texts = ["What is my order number?", "My order number is 4471, delivered on Friday."]
    joint = encode(texts)
    assert joint.shape == (2, DIMENSION)
    np.testing.assert_allclose(joint[:, :ENGLISH], local_embedder.encode(texts), atol=1e-6)
    assert not joint[:, ENGLISH:].any()


def test_thai_gets_dense_vectors_that_tell_related_from_unrelated() -> None:
    """A Thai question is close to the Thai message that answers it and far from others."""
    question, answer, other = encode(
        ["แมวของฉันชื่ออะไร", "แมวของฉันชื่อส้มโอ", "งบประมาณของฉันคือ 300 บาท"]
    )
    assert not question[:ENGLISH].any()
    assert abs(float(np.linalg.norm(question)) - 1.0) < 1e-4
    assert float(question @ answer) > float(question @ other) + 0.15


def test_texts_of_different_models_are_never_compared() -> None:
    """A Thai text and an English one have cosine 0: the models' cosines mean different
    things; and a text mostly in Thai goes to the multilingual model even when a few of its
    words are English."""
    thai, english, mixed = encode(["ฉันแพ้ถั่วลิสง", "I am allergic to peanuts", "ฉันชอบ iPhone มาก"])
    assert float(thai @ english) == 0.0
    assert not mixed[:ENGLISH].any()
    assert mixed[ENGLISH:].any()


async def test_an_english_question_is_embedded_across_for_thai_messages() -> None:
    """The ``across`` purpose: an English question by the multilingual model, comparable
    with Thai messages and close to the one that answers it; a Thai text has nothing across
    (the English model cannot read it), nor has the English-only embedder."""
    default = script_embedder.local_embedder(None)
    english = script_embedder.local_embedder("all-MiniLM-L6-v2")
    try:
        question, thai_question = await default.embed(
            ["What is my name?", "ฉันชื่ออะไร"], purpose="across"
        )
        answer, other = await default.embed(
            ["อ้อ ฉันชื่อแอนนะคะ", "งบของฉันสำหรับเรื่องนี้คือ 300 บาทค่ะ"], purpose="passage"
        )
        alone = await english.embed(["What is my name?"], purpose="across")
    finally:
        await default.aclose()
        await english.aclose()
    assert not question[:ENGLISH].any()
    assert question[ENGLISH:].any()
    assert float(question @ answer) >= 0.45  # the dense minimum
    assert float(question @ answer) > float(question @ other) + 0.2
    assert not thai_question.any()
    assert not alone.any()


def test_a_latin_speaker_label_pulls_a_thai_sentence_away_from_its_question() -> None:
    """Why a Thai entry is embedded without its "user: " label
    (``IndexEntry._spoken``): with it, a Thai question is much further from the Thai
    sentence that answers it."""
    question, bare, labelled = encode(["ว่าฉันชื่ออะไร", "อ้อ ฉันชื่อแอนนะคะ", "user: อ้อ ฉันชื่อแอนนะคะ"])
    assert float(question @ bare) > float(question @ labelled) + 0.1


@pytest.mark.parametrize(
    ("text", "readable"),
    [
        ("Hello there", True),
        ("Crème brûlée, s'il vous plaît", True),
        ("4471", True),
        ("ราคาสินค้านี้เท่าไหร่ครับ", False),
        ("ราคา of the blue kettle please", True),
        ("Привет, как дела?", False),
        ("   ", False),
    ],
)
def test_what_the_english_model_reads(text: str, readable: bool) -> None:
    assert local_embedder.readable(text) is readable


async def test_the_default_names_both_models_and_the_english_one_stays_available() -> None:
    default = script_embedder.local_embedder(None)
    english = script_embedder.local_embedder("all-MiniLM-L6-v2")
    try:
        assert (default.name, default.dimension) == (MODEL_NAME, DIMENSION)
        assert (english.name, english.dimension) == (
            local_embedder.INDEX_MODEL_ID,
            local_embedder.DIMENSION,
        )
        vectors = await default.embed(["hello", "สวัสดี"], purpose="query")
    finally:
        await default.aclose()
        await english.aclose()
    assert vectors.shape == (2, DIMENSION)
    with pytest.raises(ConfigurationError, match="not a bundled local model"):
        script_embedder.local_embedder("bge-m3")


def test_a_multilingual_model_file_that_is_not_the_pinned_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default embedder checks the multilingual model's files as it is made (the model
    itself loads on an embedder thread meanwhile)."""
    monkeypatch.setitem(multilingual_model.PINNED, "sp.model", "0" * 64)
    multilingual_model.check_files.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match="not the pinned file"):
            script_embedder.local_embedder(None)
    finally:
        monkeypatch.undo()
        multilingual_model.check_files.cache_clear()
