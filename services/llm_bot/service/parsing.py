"""Delivery body → validated InternalEventV2, or ``InvalidEvent`` with a readable reason."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from llm_bot.contract import InternalEventV2
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.errors import InvalidEvent
from llm_bot.service.outcomes import EventIds

_ID = re.compile(ID_PATTERN)
_ID_FIELDS = ("id", "tenant_id", "user_id", "conversation_id")
_MAP_FIELDS = frozenset({"metadata"})
"""Free-form maps: their keys are input, so an error path never shows them."""


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
        return InternalEventV2.model_validate_json(body)
    except ValidationError as exc:
        raise InvalidEvent(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """One readable line: the first problems with their field paths, never input values."""
    errors = exc.errors(include_input=False, include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        return f"invalid JSON: {errors[0]['msg'].removeprefix('Invalid JSON: ')}"
    parts = []
    for error in errors[:3]:
        where = _path(error["loc"])
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    suffix = f" (+{more} more)" if more > 0 else ""
    return "schema violation: " + "; ".join(parts) + suffix


def _path(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in _MAP_FIELDS:
        parts[1] = "<key>"
    return ".".join(parts) or "body"


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
