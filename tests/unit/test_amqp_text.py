"""pamqp's decoders made total: any content header the broker passes on decodes, valid text
decodes exactly as before, undecodable parts round-trip byte for byte and are named."""

from __future__ import annotations

import datetime
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands, decode, frame, header

from llm_bot.adapters import amqp_text
from llm_bot.adapters.amqp_text import UnrepresentableTimestamp, envelope_fault
from llm_bot.header_text import header_text, undecodable

amqp_text.install()

FUZZ_EXAMPLES = int(os.environ.get("LLMBOT_FUZZ_EXAMPLES", "300"))
"""``tests/bench/fuzz_envelopes.py`` sets it for a longer run."""

short_bytes = st.binary(max_size=255)
raw_timestamps = st.integers(min_value=0, max_value=2**32 - 1) | st.integers(
    min_value=253_402_300_800_000, max_value=2**64 - 1
)
"""Seconds, and values past what ``datetime`` holds. (pamqp reads 2**32..2.5e14 as
milliseconds and writes seconds back: lossy, but it never raises, so left alone.)"""
TEXT_PROPERTIES = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "message_id",
    "message_type",
    "user_id",
    "app_id",
)


def _wire(data: bytes) -> str:
    """The str whose encoding is exactly ``data`` (what the decoder gives for it)."""
    return data.decode("utf-8", "surrogateescape")


def _round_trip(properties: commands.Basic.Properties) -> commands.Basic.Properties:
    raw = frame.marshal(header.ContentHeader(0, 3, properties), 1)
    _, _, decoded = frame.unmarshal(raw)
    assert isinstance(decoded, header.ContentHeader)
    return decoded.properties


header_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(max_size=20)
    | short_bytes  # type S holding any bytes
    | raw_timestamps.map(lambda n: ("ts", n)),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(short_bytes.map(_wire), children, max_size=3)
    ),
    max_leaves=8,
)


def _timestamps(value: object) -> object:
    """Raw timestamps drawn as ("ts", n) become what the decoder yields for n."""
    if isinstance(value, tuple):
        _, raw = value
        return decode.TABLE_MAPPING[b"T"](raw.to_bytes(8, "big"))[1]
    if isinstance(value, dict):
        return {k: _timestamps(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_timestamps(v) for v in value]
    return value


@given(
    texts=st.fixed_dictionaries(dict.fromkeys(TEXT_PROPERTIES, short_bytes)),
    headers=st.dictionaries(short_bytes.map(_wire), header_values, max_size=4),
    timestamp=raw_timestamps,
)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
def test_any_content_header_decodes_and_encodes_back_to_its_bytes(
    texts: dict[str, bytes], headers: dict[str, object], timestamp: int
) -> None:
    """Fuzz: any bytes in short strings, header names, header values and timestamps."""
    stamp = decode.TABLE_MAPPING[b"T"](timestamp.to_bytes(8, "big"))[1]
    wired: dict[str, Any] = {name: _wire(value) for name, value in texts.items()}
    properties = commands.Basic.Properties(
        headers=_timestamps(headers),  # type: ignore[arg-type]
        timestamp=stamp,  # type: ignore[arg-type]
        **wired,
    )
    first = frame.marshal(header.ContentHeader(0, 3, properties), 1)
    decoded = _round_trip(properties)
    assert frame.marshal(header.ContentHeader(0, 3, decoded), 1) == first
    for name, value in texts.items():
        assert (getattr(decoded, name) or "").encode("utf-8", "surrogateescape") == value


@given(text=st.text(max_size=60))
@settings(max_examples=FUZZ_EXAMPLES)
def test_valid_text_decodes_as_pamqp_decodes_it(text: str) -> None:
    raw = bytes([len(text.encode())]) + text.encode()
    if len(text.encode()) <= 255:
        assert decode.METHODS["shortstr"](raw) == decode.short_str(raw)


def test_pamqp_alone_raises_where_the_installed_decoder_does_not() -> None:
    """Why the decoders are replaced: pamqp raises inside the connection's frame reader."""
    raw = b"\x02\xff\xfe"
    with pytest.raises(ValueError, match="utf-8"):
        decode.short_str(raw)
    assert decode.METHODS["shortstr"](raw) == (3, "\udcff\udcfe")
    with pytest.raises((ValueError, OverflowError)):
        decode.timestamp(b"\xff" * 8)
    _, stamp = decode.METHODS["timestamp"](b"\xff" * 8)
    assert isinstance(stamp, UnrepresentableTimestamp)
    assert stamp.raw == 2**64 - 1


def test_timestamps_datetime_can_hold_decode_as_before() -> None:
    raw = (1_700_000_000).to_bytes(8, "big")
    assert decode.METHODS["timestamp"](raw) == decode.timestamp(raw)
    assert decode.METHODS["timestamp"](raw)[1] == datetime.datetime(
        2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC
    )


@pytest.mark.parametrize(
    ("properties", "headers", "fault"),
    [
        ({"message-id": "evt_1", "type": "x"}, {"traceparent": "00-ab"}, None),
        ({"message-id": None, "timestamp": None}, {}, None),
        ({"message-id": "evt\udcff"}, {}, "property message-id is not valid UTF-8"),
        ({"timestamp": UnrepresentableTimestamp.of(2**64 - 1)}, {}, "property timestamp is"),
        ({}, {"x-\udcff": 1}, "a header name is not valid UTF-8"),
        ({}, {"x-a": [1, {"\udcc3": 2}]}, "header x-a holds a name that is not valid UTF-8"),
        ({}, {"x-a": {"b": [UnrepresentableTimestamp.of(2**64 - 1)]}}, "header x-a is a time"),
        ({}, {"traceparent": b"\xff"}, "header traceparent is not UTF-8 text"),
        ({}, {"tracestate": 7}, "header tracestate is not UTF-8 text"),
        ({}, {"x-binary": b"\xff\x00"}, None),  # binary headers nobody reads are fine
        ({}, {"traceparent": bytearray(b"00-ab")}, None),  # UTF-8 bytes are text
    ],
)
def test_envelope_fault_names_the_part_never_the_value(
    properties: dict[str, object], headers: dict[str, object], fault: str | None
) -> None:
    found = envelope_fault(properties, headers)
    if fault is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(fault)
        assert not undecodable(found)


def test_header_text() -> None:
    assert header_text("abc") == "abc"
    assert header_text(b"abc") == "abc"
    assert header_text(b"\xff") is None
    assert header_text("a\udcff") is None
    assert header_text(3) is None
