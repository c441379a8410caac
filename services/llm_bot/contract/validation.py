"""An InternalEventV2 validated as the service validates it, with the same one-line reason.

The service (``service/parsing.py``) and ``llm_bot.client`` both call :func:`validate_event`,
so an event the client refuses in the caller's process is refused with the words the
service's ErrorV1 would carry, and an event it accepts passes the service's schema check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from llm_bot.contract.messages import InternalEventV2

_MAP_FIELDS = frozenset({"metadata"})
"""Free-form maps: their keys are input, so an error path never shows them."""


class EventInvalid(ValueError):
    """Not a valid InternalEventV2; ``str()`` is the reason, never an input value."""


def validate_event(data: bytes | str | Mapping[str, Any]) -> InternalEventV2:
    """The event of a JSON body (or of its decoded mapping); :class:`EventInvalid` else."""
    try:
        if isinstance(data, bytes | str):
            return InternalEventV2.model_validate_json(data)
        return InternalEventV2.model_validate(dict(data))
    except ValidationError as exc:
        raise EventInvalid(describe(exc)) from exc


def describe(exc: ValidationError) -> str:
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
