"""Topic reuse: the centroid and when a message stays on topic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.topic import joined, new_topic, reused, similarity, stays_on_topic
from llm_bot.memory.topic_state import RecalledRecord, TopicState
from llm_bot.memory.working import WorkingMemory


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
    assert topic.picks == (("m:1", 1.0),)


def test_vectors_of_another_size_are_not_similar() -> None:
    """A changed embedding model never reuses an old topic."""
    assert similarity(new_topic(unit(1, 0), SELECTION), unit(1, 0, 0)) == 0.0


def test_a_topic_keeps_ids_and_scores_and_reads_back_the_same_records() -> None:
    """The selection is kept as picks; read back from the index's entries it is the same
    records in the same order (the memory block byte-identical), without what is gone."""
    entries = {
        f"m:{n}": IndexEntry(
            id=f"m:{n}",
            kind="message",
            text=f"text {n}",
            speaker="user",
            date="2026-01-0{n}",
            conversation_id="c",
            turn=n,
            seq=n,
            source_id=f"m{n}",
            terms=(),
        )
        for n in (1, 2, 3)
    }
    records = tuple(
        RecalledRecord(
            id=e.id,
            text=e.text,
            score=1 / e.turn,
            date=e.date,
            speaker=e.speaker,
            turn=e.turn,
            seq=e.seq,
        )
        for e in reversed(entries.values())
    )
    topic = new_topic(unit(1, 0), records)
    assert topic.recalled == ("m:3", "m:2", "m:1")
    assert reused(topic.picks, entries) == records
    del entries["m:2"]  # erased meanwhile
    assert [r.id for r in reused(topic.picks, entries)] == ["m:3", "m:1"]


def test_a_working_memory_written_with_records_reads_as_picks() -> None:
    """Working memory stored by an earlier version (the records under ``selection``)."""
    stored = TopicState(centroid="AAA=", recalled=("x",), scores=(0.5,)).model_dump()
    del stored["recalled"], stored["scores"]
    stored["selection"] = [{"id": "x", "text": "t", "score": 0.5, "date": "", "speaker": ""}]
    memory = WorkingMemory.model_validate_json(
        WorkingMemory().model_dump_json()[:-1] + f', "topic": {json.dumps(stored)}}}'
    )
    assert memory.topic is not None
    assert memory.topic.picks == (("x", 0.5),)
    assert "text" not in memory.model_dump_json()


def test_a_topic_has_one_score_for_each_recalled_id() -> None:
    with pytest.raises(ValidationError):
        TopicState(centroid="AAA=", recalled=("a", "b"), scores=(1.0,))
