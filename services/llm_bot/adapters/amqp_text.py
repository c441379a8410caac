"""AMQP properties and headers that pamqp cannot decode become input, not connection errors.

pamqp 4 decodes every short string of a content header (``message_id``,
``correlation_id``, ``type``, ``app_id``... and every header name) with strict UTF-8, and
every timestamp with ``datetime.fromtimestamp``. Both run inside aiormq's frame reader:
one message whose ``message_id`` is not UTF-8, or whose timestamp is past year 9999,
raises there, the connection drops, and the broker hands back the whole prefetch window,
charging every unacked neighbour a delivery: after ``x-delivery-limit`` innocent events
are dead-lettered. The broker itself does not check these bytes, so any publisher can
send them.

The narrowest fix is at those decoders: ``install()`` replaces them with total ones.

- Short strings decode with ``surrogateescape``: lossless (the undecodable bytes become
  lone surrogates U+DC80..U+DCFF), and the encoders get the same error handler, so the
  dead-letter copy carries the original bytes. ``undecodable`` (``header_text.py``) finds such text.
- Header values of type ``S`` that are not UTF-8 (Java clients send ``byte[]`` so) decode
  to ``bytes``, as pamqp already does, and now encode back to ``S`` (pamqp refuses
  ``bytes``, so such a delivery could not be dead-lettered with its headers).
- Timestamps that ``datetime`` cannot hold decode to ``UnrepresentableTimestamp``, a
  ``datetime`` (aio-pika accepts nothing else) that keeps the raw seconds and encodes back
  to them.

The consumer then refuses such a delivery as ``invalid_event`` (``envelope_fault`` says
why): the cost is that one message. Everything valid decodes
exactly as before. ``install()`` is idempotent; every process calls it before it connects.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from aio_pika.abc import AbstractIncomingMessage
from pamqp import common, decode, encode

from llm_bot.header_text import header_text, undecodable
from llm_bot.telemetry.tracing import TRACE_HEADERS

_ERRORS = "surrogateescape"
_installed = False


class UnrepresentableTimestamp(datetime.datetime):
    """A timestamp ``datetime`` cannot hold: ``datetime.max`` that remembers the raw value."""

    raw: int

    @classmethod
    def of(cls, raw: int) -> UnrepresentableTimestamp:
        top = datetime.datetime.max
        value = cls(
            top.year, top.month, top.day, top.hour, top.minute, top.second, tzinfo=datetime.UTC
        )
        value.raw = raw
        return value


def text_properties(message: AbstractIncomingMessage) -> dict[str, object]:
    """The properties pamqp decodes as text or timestamps, by AMQP name."""
    return {
        "message-id": message.message_id,
        "correlation-id": message.correlation_id,
        "content-type": message.content_type,
        "content-encoding": message.content_encoding,
        "type": message.type,
        "app-id": message.app_id,
        "user-id": message.user_id,
        "reply-to": message.reply_to,
        "cluster-id": message.cluster_id,
        "timestamp": message.timestamp,
    }


def envelope_fault(properties: Mapping[str, object], headers: Mapping[str, object]) -> str | None:
    """Why a delivery's properties or headers are unusable, or None. Never shows values."""
    for name, value in properties.items():
        fault = _value_fault(value)
        if fault is not None:
            return f"property {name} {fault}"
    for name, value in headers.items():
        if undecodable(name):
            return "a header name is not valid UTF-8"
        fault = _nested_fault(value)
        if fault is not None:
            return f"header {name} {fault}"
    for name in TRACE_HEADERS:
        value = headers.get(name)
        if value is not None and header_text(value) is None:
            return f"header {name} is not UTF-8 text"
    return None


def _nested_fault(value: object) -> str | None:
    if isinstance(value, Mapping):
        if any(undecodable(key) for key in value):
            return "holds a name that is not valid UTF-8"
        values: Iterable[object] = value.values()
    elif isinstance(value, list):
        values = value
    else:
        return _value_fault(value)
    return next((f for f in map(_nested_fault, values) if f is not None), None)


def _value_fault(value: object) -> str | None:
    if isinstance(value, str) and undecodable(value):
        return "is not valid UTF-8"
    if isinstance(value, UnrepresentableTimestamp):
        return "is a timestamp out of range"
    return None


def install() -> None:
    """Make pamqp's decoders total for short strings, table keys and timestamps."""
    global _installed  # noqa: PLW0603  # patched once per process
    if _installed:
        return
    decode.METHODS["shortstr"] = _decode_short_str
    decode.METHODS["table"] = _decode_field_table
    decode.METHODS["timestamp"] = _decode_timestamp
    decode.TABLE_MAPPING[b"F"] = _decode_field_table
    decode.TABLE_MAPPING[b"T"] = _decode_timestamp
    encode.METHODS["shortstr"] = _encode_short_str
    encode.METHODS["table"] = _encode_field_table
    encode.METHODS["timestamp"] = _encode_timestamp
    # Header values are encoded by ``encode.table_value``, which calls these by name.
    encode.field_table = _encode_field_table
    encode.timestamp = _encode_timestamp
    encode.encode_table_value = _encode_table_value
    _installed = True


def _decode_short_str(value: bytes) -> tuple[int, str]:
    try:
        length = common.Struct.byte.unpack(value[0:1])[0]
    except (struct.error, TypeError) as err:
        raise ValueError("Could not unpack short string value") from err
    return length + 1, value[1 : length + 1].decode("utf-8", _ERRORS)


def _decode_timestamp(value: bytes) -> tuple[int, datetime.datetime]:
    try:
        raw = common.Struct.timestamp.unpack(value[0:8])[0]
    except (struct.error, TypeError) as err:
        raise ValueError("Could not unpack timestamp value") from err
    seconds = raw / 1000.0 if raw > 0xFFFFFFFF else raw  # pamqp's rule: past 2106 is ms
    try:
        return 8, datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return 8, UnrepresentableTimestamp.of(raw)


def _decode_field_table(value: bytes) -> tuple[int, common.FieldTable]:
    """pamqp's ``field_table`` with header names decoded like short strings."""
    try:
        length = common.Struct.integer.unpack(value[0:4])[0]
        offset = 4
        data: dict[str, common.FieldValue] = {}
        end = offset + length
        if end > len(value):
            raise ValueError("Field table length exceeds available data")
        while offset < end:
            key_length = common.Struct.byte.unpack_from(value, offset)[0]
            offset += 1
            if offset + key_length > end:
                raise ValueError("Field table key length exceeds data")
            key = value[offset : offset + key_length].decode("utf-8", _ERRORS)
            offset += key_length
            consumed, result = decode.embedded_value(value[offset:])
            offset += consumed
            data[key] = result
    except (struct.error, TypeError) as err:
        raise ValueError("Could not unpack data") from err
    return end, data


def _encode_short_str(value: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"str required, received {type(value)}")
    data = value.encode("utf-8", _ERRORS)
    if len(data) > 255:
        raise TypeError("string exceeds maximum length of 255 bytes")
    return common.Struct.byte.pack(len(data)) + data


def _encode_timestamp(value: Any) -> bytes:
    if isinstance(value, UnrepresentableTimestamp):
        return common.Struct.timestamp.pack(value.raw)
    result: bytes = _PAMQP_TIMESTAMP(value)
    return result


def _encode_table_value(value: Any) -> bytes:
    if isinstance(value, bytes):
        return b"S" + common.Struct.integer.pack(len(value)) + value
    result: bytes = _PAMQP_TABLE_VALUE(value)
    return result


def _encode_field_table(value: common.FieldTable) -> bytes:
    """pamqp's ``field_table`` with header names encoded like short strings."""
    if not value:
        return common.Struct.integer.pack(0)
    if not isinstance(value, dict):
        raise TypeError(f"dict required, received {type(value)}")
    parts = []
    for key, item in sorted(value.items()):
        parts.append(_encode_short_str(key))
        try:
            parts.append(_encode_table_value(item))
        except TypeError as err:
            raise TypeError(f"{key} error: {err}") from err
    output = b"".join(parts)
    return common.Struct.integer.pack(len(output)) + output


_PAMQP_TIMESTAMP = encode.timestamp
_PAMQP_TABLE_VALUE = encode.encode_table_value
