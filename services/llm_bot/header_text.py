"""Text of AMQP property and header values as aio-pika hands them over, once
``adapters/amqp_text.py`` has made pamqp's decoders total: bytes that were not UTF-8 arrive
as lone surrogates (``surrogateescape``) in strings, or as ``bytes`` in header values.

Below the adapters and telemetry, which both read headers (the envelope checks, the W3C
trace context).
"""

from __future__ import annotations


def undecodable(text: str) -> bool:
    """True if ``text`` came from bytes that are not UTF-8 (it holds escaped bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def header_text(value: object) -> str | None:
    """A header's value as text: strings, and byte strings that are UTF-8; else None."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str) and not undecodable(value):
        return value
    return None
