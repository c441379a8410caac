"""The wire contract (SPEC section 3): InternalEventV2, CandidateV1, ErrorV1 and parsing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_bot.contract import CandidateV1, ErrorV1, InternalEventV2
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.contract.messages import candidate_id, derived_id
from llm_bot.errors import InvalidEvent
from llm_bot.service.outcomes import EventIds
from llm_bot.service.parsing import parse_event, readable_ids

MAX_BYTES = 262_144
SECRET = "sk-live-PLANTED-7f3a9c1e5b"  # a value that must never be echoed


def spec_event(**changes: Any) -> dict[str, Any]:
    """The InternalEventV2 example of SPEC section 3 (comments removed), with changes."""
    event: dict[str, Any] = {
        "schema": "internal.event.v2",
        "id": "evt_01J9ZX8Q",
        "type": "message",
        "tenant_id": "store_001",
        "user_id": "user123",
        "conversation_id": "sess_20250730_001",
        "created_at": "2025-07-30T10:30:00Z",
        "source": {"platform": "line", "channel": "dm"},
        "annotations": [{"kind": "prompt", "text": "ราคาสินค้านี้เท่าไหร่ครับ", "lang": "th"}],
        "metadata": {"locale": "th-TH"},
    }
    event.update(changes)
    return event


def without(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


def encode(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


def invalid_reason(body: bytes, *, max_bytes: int = MAX_BYTES) -> str:
    with pytest.raises(InvalidEvent) as caught:
        parse_event(body, max_bytes=max_bytes)
    return str(caught.value)


# --- InternalEventV2 ---------------------------------------------------------------


def test_spec_example_parses() -> None:
    """The SPEC's InternalEventV2 example is valid and keeps every field."""
    event = InternalEventV2.model_validate(spec_event())

    assert event.schema_ == "internal.event.v2"
    assert (event.id, event.type, event.tenant_id) == ("evt_01J9ZX8Q", "message", "store_001")
    assert (event.user_id, event.conversation_id) == ("user123", "sess_20250730_001")
    assert event.created_at == datetime(2025, 7, 30, 10, 30, tzinfo=UTC)
    assert event.source is not None
    assert event.source.platform == "line"
    assert event.metadata == {"locale": "th-TH"}
    assert event.prompt_text() == "ราคาสินค้านี้เท่าไหร่ครับ"


def test_prompt_text_joins_prompts_with_blank_line() -> None:
    """prompt_text() joins prompt annotations in order with a blank line, ignoring other kinds."""
    event = InternalEventV2.model_validate(
        spec_event(
            annotations=[
                {"kind": "prompt", "text": "first"},
                {"kind": "intent", "text": "not part of the prompt"},
                {"kind": "prompt", "text": "second\nline"},
                {"kind": "sentiment", "text": "positive"},
                {"kind": "prompt", "text": "third"},
            ]
        )
    )

    assert event.prompt_text() == "first\n\nsecond\nline\n\nthird"


def test_prompt_text_is_empty_without_prompt_annotations() -> None:
    """An event without prompt text yields an empty prompt (the SKIP case)."""
    event = InternalEventV2.model_validate(
        spec_event(annotations=[{"kind": "intent", "text": "greeting"}])
    )

    assert event.prompt_text() == ""


def test_unknown_top_level_fields_are_ignored() -> None:
    """Unknown top-level fields are ignored, not rejected."""
    event = InternalEventV2.model_validate(spec_event(extra_field={"a": 1}, priority=5))

    assert event.id == "evt_01J9ZX8Q"
    assert "extra_field" not in event.model_dump()


def test_minor_schema_suffix_is_accepted() -> None:
    """A minor version of the same major ('internal.event.v2.1') is accepted."""
    event = InternalEventV2.model_validate(spec_event(schema="internal.event.v2.1"))

    assert event.schema_ == "internal.event.v2.1"


def test_missing_schema_is_invalid() -> None:
    """An event without 'schema' is invalid."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(without(spec_event(), "schema"))


@pytest.mark.parametrize(
    "schema", ["internal.event.v3", "internal.event.v1", "internal.event.v20", "candidate.v1", ""]
)
def test_other_schema_or_major_is_invalid(schema: str) -> None:
    """A 'schema' of another message or another major version is invalid."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(spec_event(schema=schema))


BAD_IDS = ["", ".leading-dot", "a" * 129, "a/b", "../etc", "a{b", "a}b", "a*", "*", "a b", "a|b"]


@pytest.mark.parametrize("field", ["id", "tenant_id", "user_id", "conversation_id"])
@pytest.mark.parametrize("value", BAD_IDS)
def test_bad_ids_are_invalid(field: str, value: str) -> None:
    """Ids outside the SPEC id pattern are invalid (empty, leading '.', 129 chars, '/', '{', '*')."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(spec_event(**{field: value}))


@pytest.mark.parametrize("value", ["a", "a" * 128, "A0._:@-z", "user@example.com", "t:1"])
def test_ids_matching_the_pattern_are_valid(value: str) -> None:
    """Ids up to 128 characters from the allowed alphabet are valid."""
    event = InternalEventV2.model_validate(
        spec_event(id=value, tenant_id=value, user_id=value, conversation_id=value)
    )

    assert event.id == value


def test_conversation_star_is_valid_with_memory_forget() -> None:
    """conversation_id '*' is valid with memory.forget (all conversations of the user)."""
    event = InternalEventV2.model_validate(
        spec_event(type="memory.forget", conversation_id="*", annotations=[])
    )

    assert event.conversation_id == "*"


@pytest.mark.parametrize("type_", ["message", "conversation.end"])
def test_conversation_star_is_invalid_with_other_types(type_: str) -> None:
    """conversation_id '*' is invalid with any type but memory.forget."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(spec_event(type=type_, conversation_id="*"))


@pytest.mark.parametrize("created_at", ["2025-07-30T10:30:00", "2025-07-30 10:30:00"])
def test_naive_created_at_is_invalid(created_at: str) -> None:
    """A created_at without a timezone is invalid."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(spec_event(created_at=created_at))


@pytest.mark.parametrize("type_", ["tool.call", "tool.result"])
def test_tool_event_without_tool_is_invalid(type_: str) -> None:
    """tool.call and tool.result events without a 'tool' object are invalid."""
    with pytest.raises(ValidationError):
        InternalEventV2.model_validate(spec_event(type=type_, annotations=[]))


def test_tool_event_with_tool_is_valid() -> None:
    """A tool.call event with a 'tool' object is valid."""
    event = InternalEventV2.model_validate(
        spec_event(
            type="tool.call",
            annotations=[],
            tool={"tool_call_id": "call_1", "name": "price", "arguments": '{"sku": "1"}'},
        )
    )

    assert event.tool is not None
    assert event.tool.tool_call_id == "call_1"


# --- parse_event ---------------------------------------------------------------------


def test_parse_event_accepts_the_spec_example() -> None:
    """parse_event returns the validated event for a valid body."""
    event = parse_event(encode(spec_event()), max_bytes=MAX_BYTES)

    assert event.id == "evt_01J9ZX8Q"


def test_parse_event_rejects_oversize_body() -> None:
    """A body over the limit is invalid, and the reason names the limit."""
    body = encode(spec_event(annotations=[{"kind": "prompt", "text": SECRET * 100}]))

    reason = invalid_reason(body, max_bytes=1024)

    assert "1024" in reason
    assert SECRET not in reason


def test_parse_event_accepts_body_at_the_limit() -> None:
    """A body exactly at the limit is accepted."""
    body = encode(spec_event())

    assert parse_event(body, max_bytes=len(body)).id == "evt_01J9ZX8Q"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json " + SECRET.encode(),
        b'{"schema": "internal.event.v2", "id": "' + SECRET.encode(),
        b"{'single': 'quotes'}",
    ],
    ids=["empty", "garbage", "truncated", "single-quotes"],
)
def test_parse_event_rejects_invalid_json(body: bytes) -> None:
    """Invalid JSON is an InvalidEvent that says so, without echoing the body."""
    reason = invalid_reason(body)

    assert "json" in reason.lower()
    assert SECRET not in reason


def test_parse_event_rejects_non_utf8() -> None:
    """A body that is not UTF-8 is an InvalidEvent, without echoing the body."""
    body = encode(spec_event(id=SECRET)).replace(b"store_001", b"store_\xff\xfe1")

    reason = invalid_reason(body)

    assert reason
    assert SECRET not in reason


@pytest.mark.parametrize(
    "body", [b"[" * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000]
)
def test_parse_event_rejects_deeply_nested_json(body: bytes) -> None:
    """Deeply nested JSON is an InvalidEvent, not a RecursionError or a crash."""
    reason = invalid_reason(body, max_bytes=1_000_000)

    assert reason


@pytest.mark.parametrize(
    "changes",
    [
        {"id": 12345},
        {"id": SECRET + "/x"},
        {"type": SECRET},
        {"schema": SECRET},
        {"created_at": SECRET},
        {"annotations": SECRET},
        {"annotations": [{"kind": SECRET * 10, "text": 1}]},
        {"metadata": {"locale": [SECRET]}},
        {"metadata": {SECRET: [1]}},
        {"metadata": {SECRET * 5: "too long a key"}},
        {"source": {"platform": SECRET * 10}},
        {"tool": {"tool_call_id": SECRET + "{}"}, "type": "tool.call"},
    ],
    ids="+".join,
)
def test_parse_event_rejects_wrong_types_without_echoing_input(changes: dict[str, Any]) -> None:
    """Schema violations name the field, never the input value (nor a metadata key)."""
    reason = invalid_reason(encode(spec_event(**changes)))

    assert reason.startswith("schema violation: ")
    assert next(iter(changes)) in reason
    assert SECRET not in reason
    assert "PLANTED" not in reason
    assert "\n" not in reason


@pytest.mark.parametrize("body", [b"[]", b'"a string"', b"42", b"null"])
def test_parse_event_rejects_non_object_json(body: bytes) -> None:
    """JSON that is not an object is an InvalidEvent."""
    assert invalid_reason(body)


def test_parse_event_reason_for_missing_schema_names_the_field() -> None:
    """A missing 'schema' is reported by name."""
    reason = invalid_reason(encode(without(spec_event(), "schema")))

    assert "schema" in reason.removeprefix("schema violation: ")


# --- readable_ids --------------------------------------------------------------------


def test_readable_ids_returns_the_four_ids_of_an_invalid_event() -> None:
    """readable_ids returns the ids when all four are valid, even if the event is not."""
    body = encode(spec_event(type="no-such-type", created_at="yesterday"))

    assert readable_ids(body, max_bytes=MAX_BYTES) == EventIds(
        event_id="evt_01J9ZX8Q",
        tenant_id="store_001",
        user_id="user123",
        conversation_id="sess_20250730_001",
    )


@pytest.mark.parametrize(
    "body",
    [
        encode(spec_event(user_id="a/b")),
        encode(spec_event(conversation_id="")),
        encode(spec_event(tenant_id=7)),
        encode(without(spec_event(), "id")),
        encode([spec_event()]),
        b"not json",
        b"\xff\xfe",
        b"[" * 100_000,
    ],
    ids=["bad-user", "empty-conv", "int-tenant", "no-id", "array", "garbage", "bytes", "deep"],
)
def test_readable_ids_returns_none_unless_all_ids_are_valid(body: bytes) -> None:
    """readable_ids returns None when any id is missing or invalid or the body is unreadable."""
    assert readable_ids(body, max_bytes=1_000_000) is None


def test_readable_ids_returns_none_for_oversize_body() -> None:
    """readable_ids does not read a body over the limit."""
    body = encode(spec_event())

    assert readable_ids(body, max_bytes=len(body) - 1) is None


# --- CandidateV1 and ErrorV1 ---------------------------------------------------------


def make_candidate() -> CandidateV1:
    return CandidateV1(
        id=candidate_id("store_001", "user123", "evt_01J9ZX8Q"),
        event_id="evt_01J9ZX8Q",
        tenant_id="store_001",
        user_id="user123",
        conversation_id="sess_20250730_001",
        turn=7,
        text="สินค้านี้ราคา 250 บาทค่ะ",
        created_at=datetime(2025, 7, 30, 10, 30, 1, 200000, tzinfo=UTC),
        model="gpt-4o-mini",
        usage={"input_tokens": 812, "output_tokens": 41},
        memory={
            "window_messages": 6,
            "summary": True,
            "long_term_items": 3,
            "context_tokens": 790,
        },
    )


def make_error() -> ErrorV1:
    return ErrorV1(
        event_id="evt_01J9ZX8Q",
        tenant_id="store_001",
        user_id="user123",
        conversation_id="*",
        code="model_error",
        message="model rejected the request",
        attempts=5,
        created_at=datetime(2025, 7, 30, 10, 30, 2, tzinfo=UTC),
    )


def test_candidate_id_is_stable_and_distinct_per_tenant_and_user() -> None:
    """'cand_' + event id + '.' + 16 hex digits of tenant and user: the same for the same
    event, different for the same event id in another tenant or user (SPEC 3)."""
    first = candidate_id("store_001", "user123", "evt_01J9ZX8Q")
    assert first == candidate_id("store_001", "user123", "evt_01J9ZX8Q")
    assert re.fullmatch(r"cand_evt_01J9ZX8Q\.[0-9a-f]{16}", first)
    others = {
        candidate_id("store_002", "user123", "evt_01J9ZX8Q"),
        candidate_id("store_001", "user124", "evt_01J9ZX8Q"),
        candidate_id("store_00", "1user123", "evt_01J9ZX8Q"),
        candidate_id("store_001", "user123", "evt_01J9ZX8R"),
    }
    assert first not in others
    assert len(others) == 4


def test_candidate_dumps_with_schema_key_and_round_trips() -> None:
    """CandidateV1 dumps with the 'schema' key (by alias) and parses back equal."""
    candidate = make_candidate()

    wire = json.loads(candidate.model_dump_json(by_alias=True))

    assert wire["schema"] == "candidate.v1"
    assert "schema_" not in wire
    assert (wire["kind"], wire["status"], wire["turn"]) == ("text", "proposed", 7)
    assert wire["usage"] == {"input_tokens": 812, "output_tokens": 41, "cached_input_tokens": 0}
    assert CandidateV1.model_validate_json(candidate.model_dump_json(by_alias=True)) == candidate
    assert CandidateV1.model_validate(candidate.model_dump(by_alias=True)) == candidate


def test_error_dumps_with_schema_key_and_round_trips() -> None:
    """ErrorV1 dumps with the 'schema' key (by alias) and parses back equal."""
    error = make_error()

    wire = json.loads(error.model_dump_json(by_alias=True))

    assert wire["schema"] == "llmbot.error.v1"
    assert "schema_" not in wire
    assert set(wire) == {
        "schema",
        "event_id",
        "tenant_id",
        "user_id",
        "conversation_id",
        "code",
        "message",
        "attempts",
        "created_at",
    }
    assert ErrorV1.model_validate_json(error.model_dump_json(by_alias=True)) == error


def test_error_rejects_unknown_code() -> None:
    """ErrorV1 codes are limited to the SPEC's list."""
    with pytest.raises(ValidationError):
        ErrorV1.model_validate({**make_error().model_dump(by_alias=True), "code": "oops"})


@given(
    prefix=st.sampled_from(["job", "fin"]),
    event_id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}", fullmatch=True),
)
def test_derived_ids_are_valid_ids_for_every_valid_event_id(prefix: str, event_id: str) -> None:
    """Whatever the valid event id (up to 128 characters), the derived id is a valid id,
    the same every time, and keeps the event id whole whenever it fits."""
    derived = derived_id(prefix, event_id)
    assert re.fullmatch(ID_PATTERN, derived)
    assert derived == derived_id(prefix, event_id)
    if len(event_id) + len(prefix) + 1 <= 128:
        assert derived == f"{prefix}_{event_id}"


def test_derived_ids_of_long_event_ids_stay_distinct() -> None:
    """Two long event ids sharing their head derive two ids; a short id spelling a long
    one's derived form cannot collide with it (the hashed form starts '<prefix>h_')."""
    a, b = "a" * 127 + "1", "a" * 127 + "2"
    assert derived_id("job", a) != derived_id("job", b)
    assert len(derived_id("job", a)) == 128
    spelled = derived_id("job", a).removeprefix("jobh_")
    assert derived_id("job", spelled) != derived_id("job", a)
