"""Long-term memory items (SPEC 5.5), per tenant + user, each with its provenance."""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llm_bot.memory.classification import EventType


class Source(BaseModel):
    """Where an item came from: a conversation's turns and the events behind them, or an
    operator (``provenance="operator"``: a correction made in the inspector, with no
    conversation, so forgetting a conversation never takes it)."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    turns: tuple[int, ...]
    event_ids: tuple[str, ...] = ()
    provenance: Literal["conversation", "operator"] = "conversation"


class ProfileAttribute(BaseModel):
    """A key → value attribute of the user (preferred_language, timezone, ...)."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: str
    updated_at: str
    source: Source | None = None


class SemanticFact(BaseModel):
    """A stable fact, preference, constraint or decision about the user."""

    model_config = ConfigDict(frozen=True)

    id: str
    fact: str
    tags: tuple[str, ...] = ()
    confidence: float = Field(ge=0.0, le=1.0)
    salience: float = Field(ge=0.0, le=1.0)
    sources: tuple[Source, ...] = ()
    created_at: str
    updated_at: str
    superseded_by: str | None = None
    """The id of the fact that corrected this one (None: current). A superseded fact is
    never shown in prompts nor recalled; it stays stored (erasable, ``memory show``) until
    retention removes it."""
    superseded_at: str | None = None


class EpisodicSummary(BaseModel):
    """What happened over some turns of one conversation."""

    model_config = ConfigDict(frozen=True)

    id: str
    conversation_id: str
    turns: tuple[int, ...]
    summary: str
    tags: tuple[str, ...] = ()
    salience: float = Field(ge=0.0, le=1.0)
    created_at: str
    """When it happened (the messages' time; old for imported history)."""
    event_ids: tuple[str, ...] = ()
    recorded_at: str = ""
    """When llm-bot stored it: retention counts from here ("" for items from before this
    field: their ``created_at``)."""


class NotableEvent(BaseModel):
    """A classified user message at or above the importance threshold."""

    model_config = ConfigDict(frozen=True)

    id: str
    event_type: EventType
    importance: float = Field(ge=0.0, le=1.0)
    summary: str
    tags: tuple[str, ...] = ()
    conversation_id: str
    turn: int
    event_id: str
    created_at: str
    """When the message was said."""
    recorded_at: str = ""
    """When llm-bot stored it: retention counts from here ("": ``created_at``)."""


class LongTermBundle(BaseModel):
    """What ``recall`` loads for the memory block: a small, pre-ranked selection kept by the
    memory worker next to the full long-term store."""

    model_config = ConfigDict(frozen=True)

    profile: tuple[ProfileAttribute, ...] = ()
    facts: tuple[SemanticFact, ...] = ()
    episodes: tuple[EpisodicSummary, ...] = ()
    events: tuple[NotableEvent, ...] = ()

    def item_count(self) -> int:
        return len(self.profile) + len(self.facts) + len(self.episodes) + len(self.events)

    def item_ids(self) -> set[str]:
        """Ids of the facts, episodes and events (what the memory block already shows)."""
        ids = {fact.id for fact in self.facts} | {episode.id for episode in self.episodes}
        return ids | {event.id for event in self.events}


def _is_word_char(char: str) -> bool:
    """Letters, digits and combining marks. Thai vowel and tone marks are marks (Mn): as
    punctuation they would split every Thai word and merge ป้า (aunt) with ป่า (forest)."""
    return char.isalnum() or unicodedata.category(char)[0] == "M"


def normalize_fact(text: str) -> str:
    """Case-, accent-width- and punctuation-insensitive form used to recognise restatements."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(c if _is_word_char(c) else " " for c in folded).split())


def stable_id(prefix: str, *parts: str) -> str:
    """A deterministic id: rerunning the same work writes the same item."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]
    return f"{prefix}_{digest}"
