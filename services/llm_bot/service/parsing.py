"""Delivery body → validated InternalEventV2, or ``InvalidEvent`` with a readable reason."""

from __future__ import annotations

import json
import re
from typing import Any

from llm_bot.contract import InternalEventV2
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.contract.validation import EventInvalid, validate_event
from llm_bot.errors import InvalidEvent
from llm_bot.service.outcomes import EventIds

_ID = re.compile(ID_PATTERN)
_ID_FIELDS = ("id", "tenant_id", "user_id", "conversation_id")


def parse_event(
    body: bytes, *, max_bytes: int, envelope_fault: str | None = None
) -> InternalEventV2:
    """Validate size, encoding, JSON and schema; the error message says what is wrong.
    ``envelope_fault``: what the transport found wrong in the properties or headers."""
    if envelope_fault is not None:
        raise InvalidEvent(envelope_fault)
    if len(body) > max_bytes:
        raise InvalidEvent(f"body is {len(body)} bytes, over the {max_bytes}-byte limit")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(f"body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        return validate_event(body)
    except EventInvalid as exc:
        raise InvalidEvent(str(exc)) from exc


def readable_ids(body: bytes, *, max_bytes: int) -> EventIds | None:
    """The ids of an invalid event when all four can be read and are valid, else None."""
    if len(body) > max_bytes:
        return None
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    values = [data.get(field) for field in _ID_FIELDS]
    ids = [v for v in values if isinstance(v, str) and _ID.fullmatch(v)]
    if len(ids) != len(_ID_FIELDS):
        return None
    return EventIds(*ids)
