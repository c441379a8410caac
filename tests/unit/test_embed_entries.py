"""What the worker embeds for an entry: its sentences, the whole only when it is one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.ports import EmbeddingPurpose, Matrix
from llm_bot.service.indexer import embed_entries
from tests.support.embeddings import hashed_vector


class RecordingEmbedder:
    name = "hashed"
    dimension = 64

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        assert purpose == "passage"
        self.texts += texts
        return np.vstack([hashed_vector(t) for t in texts]).astype(np.float32)

    async def aclose(self) -> None:
        return None


def entry(entry_id: str, text: str) -> IndexEntry:
    return IndexEntry(
        id=entry_id,
        kind="message",
        text=text,
        speaker="Mel",
        date="2023-05-08T10:00:00+00:00",
        conversation_id="c1",
        turn=1,
        seq=0,
        source_id=entry_id,
        terms=tuple(keyword_terms(text)),
    )


async def test_a_one_sentence_entry_is_embedded_whole() -> None:
    embedder = RecordingEmbedder()
    ((_, vectors),) = await embed_entries(embedder, [entry("a", "We went camping at the lake")])
    assert embedder.texts == ["Mel: We went camping at the lake"]
    assert vectors.shape == (1, 64)


async def test_several_sentences_are_embedded_each_and_led_by_their_centroid() -> None:
    embedder = RecordingEmbedder()
    text = "We went camping. The kids loved the meteor shower. Then it rained all night."
    short = entry("b", "Thanks!")
    (_, vectors), (_, one) = await embed_entries(embedder, [entry("a", text), short])
    sentences = [
        "Mel: We went camping.",
        "Mel: The kids loved the meteor shower.",
        "Mel: Then it rained all night.",
    ]
    assert embedder.texts == [*sentences, "Mel: Thanks!"]
    assert vectors.shape == (4, 64)
    expected = np.mean([hashed_vector(s) for s in sentences], axis=0)
    np.testing.assert_allclose(vectors[0], expected / np.linalg.norm(expected), atol=1e-6)
    np.testing.assert_allclose(vectors[1:], [hashed_vector(s) for s in sentences], atol=1e-6)
    assert one.shape == (1, 64)
