"""What working memory keeps of the retrieval topic (``topic.py``): the centroid, how many
messages formed it, and the selection its last search recalled. Plain data: no numpy."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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
