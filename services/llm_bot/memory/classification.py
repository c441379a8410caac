"""Classification of user messages into notable events (SPEC 5.5).

Each user message gets an event type, an importance score in [0, 1], a short summary and
topic tags. The model path asks the model for structured output
(:func:`classification_json_schema`, validated by :func:`parse_model_classification`);
when the model fails or returns junk, :func:`classify_by_keywords` classifies the text
deterministically from English and Thai keyword tables.

This is the public module. The tables and their scoring guide live in
:mod:`llm_bot.memory.keyword_rules`, the normalisation and matching rules (and
:func:`is_filler`) in :mod:`llm_bot.memory.keyword_matching`; the names importers use are
re-exported here.

Everything here is pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import copy
import functools
import re
import unicodedata
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llm_bot.memory.filler_words import FILLER_ENGLISH, FILLER_THAI, THAI_PARTICLES
from llm_bot.memory.keyword_matching import VARIATION_SELECTORS, PreparedText, is_filler
from llm_bot.memory.keyword_rules import (
    ANGER_BOOST,
    ANGER_CUES,
    CASUAL_QUESTION_CUES,
    CASUAL_QUESTION_IMPORTANCE,
    EVENT_RULES,
    EVENT_TYPES,
    FILLER_IMPORTANCE,
    TOPIC_RULES,
    UNRECOGNISED_IMPORTANCE,
    URGENCY_BOOST,
    URGENCY_CUES,
    EventType,
    KeywordRule,
)

SUMMARY_MAX_CHARS: Final = 200
"""Upper bound of a stored summary (the model's summary is shortened to it)."""
KEYWORD_SUMMARY_CHARS: Final = 120
"""Length the keyword fallback trims the message text to, for its summary."""
MAX_TAGS: Final = 8

_IMPORTANCE_GUIDE = (
    "Importance from 0.0 to 1.0: 0.9-1.0 transactions and urgent complaints; "
    "0.7-0.8 specific requests and detailed feedback; 0.5-0.6 support and basic "
    "inquiries; 0.3-0.4 casual questions and general information; 0.1-0.2 greetings "
    "and small talk."
)


def _normalise_tags(tags: list[str]) -> list[str]:
    """Tags stripped and lowercased, empty ones dropped, duplicates removed (first kept)."""
    seen: dict[str, None] = {}
    for tag in tags:
        clean = " ".join(tag.split()).lower()
        if clean:
            seen.setdefault(clean, None)
    return list(seen)


class Classification(BaseModel):
    """A classified user message: the payload of a notable event (SPEC 5.5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: EventType
    importance: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    summary: str = Field(max_length=SUMMARY_MAX_CHARS)
    tags: list[str] = Field(default_factory=list)
    source: Literal["model", "keywords"]

    @field_validator("tags")
    @classmethod
    def _tags_lowercase_and_few(cls, tags: list[str]) -> list[str]:
        clean = _normalise_tags(tags)
        if len(clean) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags")
        return clean


class ModelClassification(BaseModel):
    """What the model returns under structured output: a Classification without ``source``.

    Strict: wrong types (a string for ``importance``, an unknown event type), missing or
    extra fields and an importance outside [0, 1] are rejected, so the caller falls back
    to the keywords. Lengths are not part of the schema (not every OpenAI-compatible
    provider supports them in strict mode); over-long summaries and tag lists are
    shortened on conversion instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    event_type: EventType = Field(description="The kind of event the user message is.")
    importance: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description=_IMPORTANCE_GUIDE)
    summary: str = Field(
        description="One short sentence (at most 200 characters) saying what the user wants."
    )
    tags: list[str] = Field(
        description="Up to 8 lowercase topic keywords in English, e.g. price, refund, delivery."
    )

    def to_classification(self) -> Classification:
        """The stored form: summary and tags shortened to their bounds, ``source="model"``."""
        return Classification(
            event_type=self.event_type,
            importance=self.importance,
            summary=shorten(self.summary, SUMMARY_MAX_CHARS),
            tags=_normalise_tags(self.tags)[:MAX_TAGS],
            source="model",
        )


# Keywords of the JSON schema that every strict structured-output implementation accepts.
_SCHEMA_KEYWORDS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "items", "description"}
)


def _strict_subset(node: dict[str, Any]) -> dict[str, Any]:
    """A JSON-schema node reduced to the strict-mode subset, recursively."""
    kept = {key: value for key, value in node.items() if key in _SCHEMA_KEYWORDS}
    if "properties" in kept:
        kept["properties"] = {
            name: _strict_subset(prop) for name, prop in kept["properties"].items()
        }
        kept["required"] = list(kept["properties"])
        kept["additionalProperties"] = False
    if "items" in kept:
        kept["items"] = _strict_subset(kept["items"])
    return kept


def classification_json_schema() -> dict[str, Any]:
    """The schema of :class:`ModelClassification` for OpenAI structured output.

    Send it as ``response_format={"type": "json_schema", "json_schema": {"name":
    "classification", "strict": True, "schema": classification_json_schema()}}``. It is
    strict-mode compatible: ``additionalProperties: false``, every property required, no
    titles, defaults or numeric/length constraints (ranges are described in prose and
    enforced by :func:`parse_model_classification`). A fresh copy on every call (of a
    schema built once: pydantic's generation was ~6 % of the memory worker's event loop,
    one per classified message).
    """
    return copy.deepcopy(_classification_schema())


@functools.cache
def _classification_schema() -> dict[str, Any]:
    schema = _strict_subset(ModelClassification.model_json_schema())
    schema["description"] = "The classification of one user message."
    return schema


_FENCE = re.compile(r"^```(?:json)?\s*(?P<body>.*?)\s*```$", re.DOTALL | re.IGNORECASE)


def parse_model_classification(text: str) -> Classification | None:
    """The model's JSON as a Classification, or None when it is junk or out of range.

    A JSON object in a Markdown code fence is accepted (providers without structured
    output sometimes wrap it); anything else that is not exactly the schema is rejected.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body")
    try:
        parsed = ModelClassification.model_validate_json(body)
    except ValidationError:
        return None
    return parsed.to_classification()


# ---------------------------------------------------------------------------
# Keyword classification
# ---------------------------------------------------------------------------


def _is_cut_inside_cluster(text: str, cut: int) -> bool:
    """Would cutting before ``text[cut]`` split a character from its marks or joiners?"""
    nxt = text[cut]
    return (
        unicodedata.combining(nxt) != 0
        or unicodedata.category(nxt) in {"Mn", "Mc", "Me", "Sk"}
        or nxt in VARIATION_SELECTORS
        or nxt == "\u200d"
        or text[cut - 1] == "\u200d"
    )


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed and, if longer than ``limit``, cut to at most ``limit`` characters.

    The cut falls on a word boundary when one is near the end (English), else on a
    character boundary that keeps Thai vowels and tone marks (and emoji joiners) with
    their base character; an ellipsis marks the cut and counts toward the limit.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    budget = limit - 1  # room for the ellipsis
    space = flat.rfind(" ", 0, budget + 1)
    if space >= budget * 0.6:
        return flat[:space].rstrip() + "…"
    cut = budget
    while cut > 0 and _is_cut_inside_cluster(flat, cut):
        cut -= 1
    if cut == 0:  # nothing but marks: any cut will do
        cut = budget
    return flat[:cut].rstrip() + "…"


def _score(rule: KeywordRule, *, urgent: bool, angry: bool) -> float:
    score = rule.importance
    if urgent:
        score += URGENCY_BOOST.get(rule.event_type, 0.0)
    if angry:
        score += ANGER_BOOST.get(rule.event_type, 0.0)
    return round(min(score, 1.0), 2)


def _topic_tags(text: PreparedText) -> list[str]:
    return [topic.tag for topic in TOPIC_RULES if text.matches(topic.english, topic.thai)][
        :MAX_TAGS
    ]


def _best_event(text: PreparedText) -> tuple[float, EventType]:
    """The highest-scoring event rule that matches, else a casual question or generic event."""
    urgent = text.matches_rule(URGENCY_CUES)
    angry = text.matches_rule(ANGER_CUES)
    best: tuple[float, EventType] | None = None
    for rule in EVENT_RULES:
        if text.matches_rule(rule):
            score = _score(rule, urgent=urgent, angry=angry)
            if best is None or score > best[0]:
                best = (score, rule.event_type)
    if best is not None:
        return best
    if text.matches_rule(CASUAL_QUESTION_CUES):
        return CASUAL_QUESTION_IMPORTANCE, "INQUIRY"
    return UNRECOGNISED_IMPORTANCE, "GENERIC_EVENT"


def classify_by_keywords(text: str) -> Classification:
    """Deterministic English/Thai keyword classification, the fallback of the model path.

    Filler is a GENERIC_EVENT of importance 0.1. Otherwise every event rule that matches
    is scored (its base importance, plus the urgency and anger boosts of its type) and the
    highest score wins, the earlier rule on a tie. With no rule, a question is a casual
    INQUIRY (0.35) and anything else a GENERIC_EVENT (0.3). Never raises.
    """
    summary = shorten(text, KEYWORD_SUMMARY_CHARS)
    if is_filler(text):
        return Classification(
            event_type="GENERIC_EVENT",
            importance=FILLER_IMPORTANCE,
            summary=summary,
            tags=[],
            source="keywords",
        )
    prepared = PreparedText.of(text)
    importance, event_type = _best_event(prepared)
    return Classification(
        event_type=event_type,
        importance=importance,
        summary=summary,
        tags=_topic_tags(prepared),
        source="keywords",
    )


__all__ = [
    "EVENT_RULES",
    "EVENT_TYPES",
    "FILLER_ENGLISH",
    "FILLER_THAI",
    "THAI_PARTICLES",
    "TOPIC_RULES",
    "Classification",
    "EventType",
    "ModelClassification",
    "classification_json_schema",
    "classify_by_keywords",
    "is_filler",
    "parse_model_classification",
    "shorten",
]
