"""Topic reuse (SPEC 5.7): while the conversation stays on one topic, the last selection
of recalled items is reused instead of searching again.

The conversation keeps a topic: the centroid (mean direction) of the query embeddings of
the messages that searched or reused under it, and the selection of the last search. A
new message whose embedding has cosine >= ``LLM_BOT_TOPIC_SIMILARITY`` with the centroid
stays on the topic: the selection is reused unchanged (so the memory block, and with it the
prompt prefix, stays byte-identical, which providers' prompt caches reward) and the
centroid moves towards the message. Otherwise the message starts a new topic: a search,
whose selection and embedding become the topic. Pure; the state is kept in working memory.
"""

from __future__ import annotations

import base64

import numpy as np
from pydantic import BaseModel, ConfigDict

from llm_bot.memory.vectors import Vector, unit


class RecalledRecord(BaseModel):
    """One recalled item as the prompt shows it (kept with the topic for reuse)."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    score: float
    date: str = ""
    speaker: str = ""
    turn: int = 0
    seq: int = 0


class TopicState(BaseModel):
    """The conversation's current topic: centroid (base64 float16), how many messages
    formed it, and the selection its search recalled."""

    model_config = ConfigDict(frozen=True)

    centroid: str
    size: int = 1
    selection: tuple[RecalledRecord, ...] = ()

    def vector(self) -> Vector:
        raw = base64.b64decode(self.centroid)
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32)


def encode_vector(vector: Vector) -> str:
    return base64.b64encode(unit(vector).astype(np.float16).tobytes()).decode()


def similarity(topic: TopicState, vector: Vector) -> float:
    """Cosine of ``vector`` with the topic's centroid (0 for vectors of another size)."""
    centroid = topic.vector()
    query = unit(vector)
    if centroid.size != query.size:
        return 0.0
    return float(unit(centroid) @ query)


def stays_on_topic(topic: TopicState | None, vector: Vector, threshold: float) -> bool:
    return topic is not None and bool(topic.selection) and similarity(topic, vector) >= threshold


def joined(topic: TopicState, vector: Vector) -> TopicState:
    """The topic after one more message on it: the centroid is the running mean direction."""
    centroid = unit(unit(topic.vector()) * topic.size + unit(vector))
    return topic.model_copy(update={"centroid": encode_vector(centroid), "size": topic.size + 1})


def new_topic(vector: Vector, selection: tuple[RecalledRecord, ...]) -> TopicState:
    return TopicState(centroid=encode_vector(vector), size=1, selection=selection)
