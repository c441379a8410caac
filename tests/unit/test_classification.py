"""Event classification (SPEC 5.5): the model's structured output and the keyword fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_bot.memory.classification import (
    EVENT_RULES,
    EVENT_TYPES,
    FILLER_ENGLISH,
    FILLER_THAI,
    THAI_PARTICLES,
    TOPIC_RULES,
    Classification,
    ModelClassification,
    classification_json_schema,
    classify_by_keywords,
    is_filler,
    parse_model_classification,
    shorten,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD_MODEL_OUTPUT: dict[str, Any] = {
    "event_type": "INQUIRY",
    "importance": 0.55,
    "summary": "Asks the price of the blue kettle.",
    "tags": ["price", "product"],
}


# --- keyword fallback: the SPEC and reference examples -------------------------------------


@pytest.mark.parametrize(
    ("text", "event_type", "low", "high"),
    [
        ("ราคาสินค้านี้เท่าไหร่ครับ", "INQUIRY", 0.5, 0.6),
        ("How much is the blue kettle?", "INQUIRY", 0.5, 0.6),
        ("ขอเปลี่ยนที่อยู่จัดส่งเป็นวันเสาร์", "REQUEST", 0.7, 0.8),
        ("Please change my delivery to Saturday", "REQUEST", 0.7, 0.8),
        ("I want to book a table for four", "REQUEST", 0.7, 0.8),
        ("แนะนำสินค้าหน่อยนะคะ", "REQUEST", 0.7, 0.8),
        ("ช่วยเปลี่ยนสีให้หน่อยค่ะ", "REQUEST", 0.7, 0.8),
        ("จองโต๊ะ 4 คน", "REQUEST", 0.7, 0.8),
        ("Great service, the staff were very helpful", "FEEDBACK", 0.7, 0.8),
        ("ประทับใจบริการมากค่ะ", "FEEDBACK", 0.7, 0.8),
        ("Not satisfied with service", "COMPLAINT", 0.7, 0.8),
        ("ไม่พอใจบริการครับ", "COMPLAINT", 0.7, 0.8),
        ("สินค้าเสียหาย ไม่พอใจมาก ด่วน", "COMPLAINT", 0.9, 1.0),
        ("This is unacceptable, my kettle arrived broken", "COMPLAINT", 0.9, 1.0),
        ("Cancel my order please", "TRANSACTION", 0.9, 1.0),
        ("ต้องการคืนเงินค่ะ", "TRANSACTION", 0.9, 1.0),
        ("โอนเงินแล้วนะคะ", "TRANSACTION", 0.9, 1.0),
        ("Order #123 payment done", "TRANSACTION", 0.9, 1.0),
        ("How do I reset my password?", "SUPPORT", 0.5, 0.6),
        ("แอพใช้งานไม่ได้ครับ", "SUPPORT", 0.5, 0.6),
        ("This doesn't work, I get an error", "SUPPORT", 0.5, 0.6),
        ("When do you open?", "INQUIRY", 0.5, 0.6),
        ("ที่อยู่คือ 99 ถนนสุขุมวิท", "INFORMATION", 0.5, 0.6),
        ("What's your name?", "INQUIRY", 0.3, 0.4),
        ("ชอบสีอะไร", "INQUIRY", 0.3, 0.4),
        ("สวัสดีครับ", "GENERIC_EVENT", 0.1, 0.2),
        ("Hello there!", "GENERIC_EVENT", 0.1, 0.2),
    ],
)
def test_keyword_examples_follow_the_scoring_guide(
    text: str, event_type: str, low: float, high: float
) -> None:
    """Each example gets the expected event type and an importance in its SPEC band."""
    result = classify_by_keywords(text)
    assert result.event_type == event_type
    assert low <= result.importance <= high
    assert result.source == "keywords"


def test_charged_twice_with_urgency_is_critical() -> None:
    """A double charge demanding a refund now is a transaction or complaint of at least 0.9."""
    result = classify_by_keywords("I was charged twice, refund me now!")
    assert result.event_type in {"TRANSACTION", "COMPLAINT"}
    assert result.importance >= 0.9
    assert {"refund", "payment"} <= set(result.tags)


def test_angry_or_urgent_complaints_score_higher_than_plain_ones() -> None:
    """Anger and urgency each lift a complaint, and both together lift it further."""
    plain = classify_by_keywords("สินค้าเสียหาย")
    urgent = classify_by_keywords("สินค้าเสียหาย ด่วน")
    angry = classify_by_keywords("สินค้าเสียหาย ไม่พอใจมาก")
    both = classify_by_keywords("สินค้าเสียหาย ไม่พอใจมาก ด่วน")
    assert {plain.event_type, urgent.event_type, angry.event_type, both.event_type} == {"COMPLAINT"}
    assert plain.importance < urgent.importance <= both.importance
    assert plain.importance < angry.importance <= both.importance
    assert both.importance >= 0.9


def test_urgency_keeps_other_events_within_their_band() -> None:
    """Urgency nudges a support request up but not into another band."""
    calm = classify_by_keywords("the app keeps crashing")
    urgent = classify_by_keywords("urgent: the app keeps crashing")
    assert calm.event_type == urgent.event_type == "SUPPORT"
    assert calm.importance < urgent.importance <= 0.6


def test_negated_praise_is_a_complaint_not_feedback() -> None:
    """ไม่พอใจ contains พอใจ and "not satisfied" contains "satisfied": the complaint wins."""
    assert classify_by_keywords("ไม่พอใจ").event_type == "COMPLAINT"
    assert classify_by_keywords("I am not satisfied").event_type == "COMPLAINT"
    assert classify_by_keywords("I am satisfied").event_type == "FEEDBACK"


def test_particles_inside_words_do_not_hide_keywords() -> None:
    """แนะนำ contains the particle นะ and still reads as a recommendation request."""
    result = classify_by_keywords("แนะนำหน่อย")
    assert result.event_type == "REQUEST"
    assert "recommendation" in result.tags


def test_english_cues_match_whole_words_only() -> None:
    """ "pay" inside "display" or "hi" inside "this" is no cue."""
    assert classify_by_keywords("the display is dim").event_type == "GENERIC_EVENT"
    assert not is_filler("this")


def test_tags_are_normalised_topics() -> None:
    """Tags name the matched topics, lowercase, in table order."""
    assert classify_by_keywords("ราคาสินค้านี้เท่าไหร่ครับ").tags == ["price", "product"]
    assert classify_by_keywords("ขอเปลี่ยนที่อยู่จัดส่งเป็นวันเสาร์").tags == [
        "delivery",
        "address",
        "schedule",
    ]
    assert classify_by_keywords("Where is my DELIVERY?").tags == ["delivery"]


def test_filler_is_a_generic_event_without_tags() -> None:
    """Greetings and thanks are generic events of minimal importance and no tags."""
    for text in ("thanks!", "สวัสดีครับ", "555", "👍", "ok"):
        result = classify_by_keywords(text)
        assert (result.event_type, result.importance, result.tags) == ("GENERIC_EVENT", 0.1, [])


def test_keyword_summary_is_the_trimmed_text() -> None:
    """The summary is the text, whitespace collapsed, cut near 120 characters on a word."""
    assert classify_by_keywords("  How much   is it? ").summary == "How much is it?"
    long_text = "please change my delivery address " * 10
    summary = classify_by_keywords(long_text).summary
    assert len(summary) <= 120
    assert summary.endswith("…")
    assert long_text.startswith(summary[:-1])
    assert summary[-2] != " "


# --- shorten ----------------------------------------------------------------------------------


def test_shorten_cuts_english_on_a_word_boundary() -> None:
    """An English text is cut between words, with an ellipsis."""
    assert shorten("alpha beta gamma delta", 12) == "alpha beta…"


def test_shorten_keeps_thai_marks_with_their_base_character() -> None:
    """A Thai text without spaces is cut before a base character, never before a tone mark."""
    text = "ที่" * 10  # ท + ี + ่ repeated: cutting at 5 would strand marks
    result = shorten(text, 6)
    assert result == "ที่" + "…"
    assert len(shorten("ก" * 300, 120)) == 120


def test_shorten_leaves_short_text_alone() -> None:
    """Text within the limit comes back with its whitespace collapsed only."""
    assert shorten(" a\n b ", 10) == "a b"


# --- is_filler --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "ok",
        "OK!",
        "okkk",
        "thanks",
        "thanks!",
        "Thank you so much",
        "hi",
        "hello there",
        "555",
        "5555555",
        "ครับ",
        "ค่ะ",
        "ค่าาา",
        "นะคะ",
        "สวัสดีครับ",
        "ขอบคุณมากครับ",
        "โอเคค่ะ 👍",
        "👍",
        "👍🏽",
        "hahaha",
        "ok ครับ",
        "okครับ",
        "",
        "   ",
        "...",
    ],
)
def test_is_filler_accepts_greetings_acks_laughter_and_particles(text: str) -> None:
    """Greetings, acknowledgements, laughter, particles and emoji alone are filler."""
    assert is_filler(text)


@pytest.mark.parametrize(
    "text",
    [
        "ok, cancel my order",
        "thanks, how much is it?",
        "ราคาเท่าไหร่ครับ",
        "ไม่พอใจค่ะ",
        "555 บาท",
        "this",
        "ครับ ส่งวันเสาร์นะ",
        "great service",
    ],
)
def test_is_filler_rejects_messages_with_content(text: str) -> None:
    """Anything with content beside the filler is not filler."""
    assert not is_filler(text)


# --- keyword tables ---------------------------------------------------------------------------


def test_every_event_cue_matches_itself() -> None:
    """Every English and Thai cue classifies as at least its own rule (no dead keywords)."""
    for rule in EVENT_RULES:
        for cue in (*rule.english, *rule.thai):
            result = classify_by_keywords(cue)
            assert result.importance >= rule.importance, (cue, rule.event_type, result)


def test_every_topic_cue_yields_its_tag() -> None:
    """Every topic keyword, alone, is tagged with its topic."""
    for topic in TOPIC_RULES:
        for cue in (*topic.english, *topic.thai):
            assert topic.tag in classify_by_keywords(cue).tags, (cue, topic.tag)


def test_every_filler_entry_is_filler() -> None:
    """Every filler word and particle, alone, is filler."""
    for entry in (*FILLER_ENGLISH, *FILLER_THAI, *THAI_PARTICLES):
        assert is_filler(entry), entry


def test_keyword_tables_are_immutable_and_well_formed() -> None:
    """Rules are frozen, importances sit in [0, 1], tags are unique lowercase words."""
    assert isinstance(EVENT_RULES, tuple)
    assert isinstance(TOPIC_RULES, tuple)
    for rule in EVENT_RULES:
        assert 0.0 <= rule.importance <= 1.0
        assert rule.event_type in EVENT_TYPES
        with pytest.raises(AttributeError):
            rule.importance = 0.0  # type: ignore[misc]
    tags = [topic.tag for topic in TOPIC_RULES]
    assert len(tags) == len(set(tags))
    assert all(tag == tag.lower() for tag in tags)


# --- model output ------------------------------------------------------------------------------


def test_parse_accepts_good_json() -> None:
    """Valid model JSON becomes a Classification with source "model"."""
    result = parse_model_classification(json.dumps(GOOD_MODEL_OUTPUT))
    assert result == Classification(
        event_type="INQUIRY",
        importance=0.55,
        summary="Asks the price of the blue kettle.",
        tags=["price", "product"],
        source="model",
    )


def test_parse_accepts_json_in_a_code_fence() -> None:
    """A JSON object wrapped in a ```json fence is accepted."""
    fenced = "```json\n" + json.dumps(GOOD_MODEL_OUTPUT) + "\n```"
    assert parse_model_classification(fenced) is not None


def test_parse_normalises_tags_and_shortens_the_summary() -> None:
    """Tags are lowercased, deduplicated and capped at 8; a long summary is cut to 200."""
    raw = {
        **GOOD_MODEL_OUTPUT,
        "summary": "word " * 100,
        "tags": ["Price", " price ", "", *(f"t{i}" for i in range(10))],
    }
    result = parse_model_classification(json.dumps(raw))
    assert result is not None
    assert result.tags == ["price", "t0", "t1", "t2", "t3", "t4", "t5", "t6"]
    assert len(result.summary) <= 200


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "not json",
        "[]",
        "null",
        '{"event_type": "INQUIRY"}',
        json.dumps({**GOOD_MODEL_OUTPUT, "importance": 1.5}),
        json.dumps({**GOOD_MODEL_OUTPUT, "importance": -0.1}),
        json.dumps({**GOOD_MODEL_OUTPUT, "importance": "0.5"}),
        json.dumps({**GOOD_MODEL_OUTPUT, "importance": True}),
        json.dumps({**GOOD_MODEL_OUTPUT, "importance": None}),
        json.dumps({**GOOD_MODEL_OUTPUT, "event_type": "inquiry"}),
        json.dumps({**GOOD_MODEL_OUTPUT, "event_type": "GREETING"}),
        json.dumps({**GOOD_MODEL_OUTPUT, "tags": "price"}),
        json.dumps({**GOOD_MODEL_OUTPUT, "summary": 42}),
        json.dumps({**GOOD_MODEL_OUTPUT, "source": "model"}),
        '{"event_type": "INQUIRY", "importance": NaN, "summary": "x", "tags": []}',
    ],
)
def test_parse_rejects_junk_wrong_types_and_out_of_range(raw: str) -> None:
    """Junk, missing or extra fields, wrong types and out-of-range importance give None."""
    assert parse_model_classification(raw) is None


def test_classification_validates_its_fields() -> None:
    """Classification rejects out-of-range importance, long summaries and too many tags."""
    base: dict[str, Any] = {
        "event_type": "INQUIRY",
        "importance": 0.5,
        "summary": "s",
        "tags": [],
        "source": "keywords",
    }
    for bad in (
        {"importance": 1.01},
        {"importance": float("nan")},
        {"summary": "x" * 201},
        {"tags": [f"t{i}" for i in range(9)]},
        {"source": "guess"},
    ):
        with pytest.raises(ValidationError):
            Classification(**{**base, **bad})
    assert Classification(**{**base, "tags": ["Price", "price"]}).tags == ["price"]


def test_classification_is_frozen() -> None:
    """A Classification cannot be changed after it is made."""
    result = classify_by_keywords("hello")
    with pytest.raises(ValidationError):
        result.importance = 1.0  # type: ignore[misc]


# --- JSON schema -------------------------------------------------------------------------------


def _objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    found = [schema] if schema.get("type") == "object" else []
    for prop in schema.get("properties", {}).values():
        found.extend(_objects(prop))
    if isinstance(schema.get("items"), dict):
        found.extend(_objects(schema["items"]))
    return found


def test_schema_is_strict_mode_compatible() -> None:
    """Every object forbids extra properties and requires all of its properties."""
    schema = classification_json_schema()
    objects = _objects(schema)
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])


def test_schema_matches_the_model_output_without_source() -> None:
    """The schema's properties are ModelClassification's fields; source is not among them."""
    schema = classification_json_schema()
    assert set(schema["properties"]) == set(ModelClassification.model_fields)
    assert "source" not in schema["properties"]
    assert schema["properties"]["event_type"]["enum"] == list(EVENT_TYPES)
    assert schema["properties"]["importance"]["type"] == "number"
    assert schema["properties"]["tags"]["items"] == {"type": "string"}


def test_schema_uses_only_the_strict_subset_of_keywords() -> None:
    """No titles, defaults, $refs or length/range constraints that strict mode may refuse."""
    allowed = {"type", "properties", "required", "additionalProperties", "enum", "items"}
    allowed |= {"description"}

    def keys(node: Any) -> set[str]:
        if not isinstance(node, dict):
            return set()
        found = set(node)
        for name, value in node.items():
            if name == "properties":
                for prop in value.values():
                    found |= keys(prop)
            elif name == "items":
                found |= keys(value)
        return found

    assert keys(classification_json_schema()) <= allowed


def test_schema_fits_the_openai_response_format() -> None:
    """The schema serialises into the response_format the model path sends."""
    response_format = {
        "type": "json_schema",
        "json_schema": {
            "name": "classification",
            "strict": True,
            "schema": classification_json_schema(),
        },
    }
    assert json.loads(json.dumps(response_format)) == response_format
    assert classification_json_schema() is not classification_json_schema()
    changed = classification_json_schema()
    changed["properties"].clear()  # the schema is built once: no caller changes the next
    assert classification_json_schema()["properties"]


# --- properties ----------------------------------------------------------------------------------


@SETTINGS
@given(st.text(max_size=400))
def test_keyword_classification_never_raises_and_stays_in_range(text: str) -> None:
    """Any unicode text classifies without error, importance in [0, 1], deterministically."""
    first = classify_by_keywords(text)
    assert 0.0 <= first.importance <= 1.0
    assert first.event_type in EVENT_TYPES
    assert len(first.summary) <= 120
    assert len(first.tags) <= 8
    assert classify_by_keywords(text) == first


@SETTINGS
@given(
    st.lists(
        st.sampled_from(["ราคา", "ครับ", "ด่วน", "refund", " ", "!", "ไม่", "พอใจ", "help", "?"]),
        max_size=12,
    ).map("".join)
)
def test_keyword_classification_of_keyword_soup_stays_in_range(text: str) -> None:
    """Texts dense with cues still score within [0, 1] and never raise."""
    result = classify_by_keywords(text)
    assert 0.0 <= result.importance <= 1.0


@SETTINGS
@given(st.text(max_size=200))
def test_parse_model_classification_never_raises(text: str) -> None:
    """Arbitrary text given as model output is parsed or rejected, never raises."""
    result = parse_model_classification(text)
    assert result is None or 0.0 <= result.importance <= 1.0
