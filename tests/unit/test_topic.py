"""Topic reuse: the centroid and when a message stays on topic."""

from __future__ import annotations

import numpy as np

from llm_bot.memory.topic import joined, new_topic, similarity, stays_on_topic
from llm_bot.memory.topic_state import RecalledRecord


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


SELECTION = (RecalledRecord(id="m:1", text="hello", score=1.0),)


def test_similar_message_stays_on_topic() -> None:
    """Cosine at or above the threshold reuses; below it searches."""
    topic = new_topic(unit(1, 0, 0), SELECTION)
    assert stays_on_topic(topic, unit(1, 0.1, 0), 0.9)
    assert not stays_on_topic(topic, unit(0, 1, 0), 0.9)


def test_a_topic_without_selection_is_never_reused() -> None:
    """Nothing recalled last time: search again."""
    assert not stays_on_topic(new_topic(unit(1, 0), ()), unit(1, 0), 0.5)
    assert not stays_on_topic(None, unit(1, 0), 0.5)


def test_centroid_is_the_running_mean_direction() -> None:
    """Two messages at right angles leave the centroid halfway between them."""
    topic = joined(new_topic(unit(1, 0), SELECTION), unit(0, 1))
    assert topic.size == 2
    assert abs(similarity(topic, unit(1, 1)) - 1.0) < 1e-3
    assert topic.selection == SELECTION


def test_vectors_of_another_size_are_not_similar() -> None:
    """A changed embedding model never reuses an old topic."""
    assert similarity(new_topic(unit(1, 0), SELECTION), unit(1, 0, 0)) == 0.0
