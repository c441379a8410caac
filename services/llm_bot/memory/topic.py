"""Topic reuse (SPEC 5.7): while the conversation stays on one topic, the last selection
of recalled items is reused instead of searching again.

The conversation keeps a topic: the centroid (mean direction) of the query embeddings of
the messages that searched or reused under it, and the selection of the last search. A
new message whose embedding has cosine >= ``LLM_BOT_TOPIC_SIMILARITY`` with the centroid
stays on the topic: the selection is reused unchanged (kept as entry ids and scores, read
back from the index: the memory block, and with it the prompt prefix, stays byte-identical,
which providers' prompt caches reward) and the
centroid moves towards the message. Otherwise the message starts a new topic: a search,
whose selection and embedding become the topic. Pure; the state is kept in working memory.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import numpy as np

from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.topic_state import RecalledRecord, TopicState
from llm_bot.memory.vectors import Vector, unit


def centroid_of(topic: TopicState) -> Vector:
    """The topic's centroid (stored base64, half precision) as a vector."""
    raw = base64.b64decode(topic.centroid)
    return np.frombuffer(raw, dtype=np.float16).astype(np.float32)


def encode_vector(vector: Vector) -> str:
    return base64.b64encode(unit(vector).astype(np.float16).tobytes()).decode()


def similarity(topic: TopicState, vector: Vector) -> float:
    """Cosine of ``vector`` with the topic's centroid (0 for vectors of another size)."""
    centroid = centroid_of(topic)
    query = unit(vector)
    if centroid.size != query.size:
        return 0.0
    return float(unit(centroid) @ query)


def stays_on_topic(topic: TopicState | None, vector: Vector, threshold: float) -> bool:
    return topic is not None and bool(topic.recalled) and similarity(topic, vector) >= threshold


def joined(topic: TopicState, vector: Vector) -> TopicState:
    """The topic after one more message on it: the centroid is the running mean direction."""
    centroid = unit(unit(centroid_of(topic)) * topic.size + unit(vector))
    return topic.model_copy(update={"centroid": encode_vector(centroid), "size": topic.size + 1})


def new_topic(vector: Vector, selection: tuple[RecalledRecord, ...]) -> TopicState:
    return TopicState(
        centroid=encode_vector(vector),
        size=1,
        recalled=tuple(record.id for record in selection),
        scores=tuple(record.score for record in selection),
    )


def reused(
    picks: Sequence[tuple[str, float]], found: Mapping[str, IndexEntry]
) -> tuple[RecalledRecord, ...]:
    """A topic's selection as its search recalled it, from its entries read back (in the
    same order, with the same scores: the memory block comes out byte-identical); an entry
    no longer there (erased, retired) drops out."""
    return tuple(
        recalled_record(entry, score)
        for entry_id, score in picks
        if (entry := found.get(entry_id)) is not None
    )


def recalled_record(entry: IndexEntry, score: float) -> RecalledRecord:
    """An index entry as the prompt shows it, with the score it was recalled with."""
    return RecalledRecord(
        id=entry.id,
        text=entry.text,
        score=score,
        date=entry.date,
        speaker=entry.speaker,
        turn=entry.turn,
        seq=entry.seq,
    )
