"""What working memory keeps of the retrieval topic (``topic.py``): the centroid, how many
messages formed it, and the selection its last search recalled. Plain data: no numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


@dataclass(frozen=True, slots=True)
class RecalledRecord:
    """One recalled item as the prompt shows it (read back from the index on reuse: only
    its id and score are kept with the topic)."""

    id: str
    text: str
    score: float
    date: str = ""
    speaker: str = ""
    turn: int = 0
    seq: int = 0


class TopicState(BaseModel):
    """The conversation's current topic: centroid (base64 float16), how many messages
    formed it, and what its search recalled: the entries' ids in order, with their scores.

    Only the ids are kept: the records themselves (~160, ~35 kB of JSON at the default
    recall budget) were read and written with working memory on every event. A working
    memory written before keeps its records under ``selection``: read as ids and scores."""

    model_config = ConfigDict(frozen=True)

    centroid: str
    size: int = 1
    recalled: tuple[str, ...] = ()
    """Ids of the index entries recalled, in the order the prompt shows them."""
    scores: tuple[float, ...] = ()
    """Their scores, in the same order."""

    @model_validator(mode="before")
    @classmethod
    def _ids_of_records(cls, data: Any) -> Any:
        if isinstance(data, dict) and "selection" in data and "recalled" not in data:
            records = [r for r in data.get("selection") or () if isinstance(r, dict)]
            data = {k: v for k, v in data.items() if k != "selection"} | {
                "recalled": [r["id"] for r in records],
                "scores": [r["score"] for r in records],
            }
        return data

    @model_validator(mode="after")
    def _one_score_each(self) -> TopicState:
        if len(self.scores) != len(self.recalled):
            raise ValueError("a topic needs one score for each recalled id")
        return self

    @property
    def picks(self) -> tuple[tuple[str, float], ...]:
        """(entry id, score) of each recalled entry, in order."""
        return tuple(zip(self.recalled, self.scores, strict=True))
