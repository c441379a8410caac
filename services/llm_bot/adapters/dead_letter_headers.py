"""Reading a dead letter's headers and body without exposing its content, and the headers
of its replay.

A dead letter carries ``x-error-code``, ``x-error-message`` and ``x-attempts`` when the
service dead-lettered it (SPEC 3), or the broker's ``x-death`` table when the broker did
(delivery limit, reject, expiry). Bodies are user content: only the event and tenant ids
are read from them, and only when they match the SPEC id pattern.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from llm_bot.contract.identifiers import ID_PATTERN

MAX_PARSED_BODY_BYTES = 1024 * 1024  # larger bodies are not parsed for ids
REPLAY_DROPPED_HEADERS = ("x-death", "x-delivery-count", "x-attempts")
REPLAY_DROPPED_PREFIXES = ("x-error-", "x-first-death-", "x-last-death-")
REPLAYED_AT_HEADER = "x-replayed-at"

_ID = re.compile(ID_PATTERN)


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


def _deaths(headers: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The broker's ``x-death`` entries, most recent first."""
    raw = headers.get("x-death")
    return [entry for entry in raw if isinstance(entry, Mapping)] if isinstance(raw, list) else []


def error_code(headers: Mapping[str, Any]) -> str:
    """``x-error-code`` when the service dead-lettered the message, else ``broker:<reason>``
    from the broker's ``x-death`` header (``broker:delivery_limit``, ``broker:rejected``...)."""
    code = _text(headers.get("x-error-code"))
    if code:
        return code
    deaths = _deaths(headers)
    reason = _text(deaths[0].get("reason")) if deaths else None
    reason = reason or _text(headers.get("x-first-death-reason"))
    return f"broker:{reason}" if reason else "unknown"


def error_message(headers: Mapping[str, Any]) -> str | None:
    """``x-error-message`` (which never echoes input), or what the broker's ``x-death`` says."""
    if "x-error-code" in headers or not (deaths := _deaths(headers)):
        return _text(headers.get("x-error-message"))
    reason, queue = _text(deaths[0].get("reason")), _text(deaths[0].get("queue"))
    return f"dead-lettered by the broker ({reason}) from queue {queue}"


def attempts(headers: Mapping[str, Any]) -> int | None:
    value = headers.get("x-attempts")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def first_death(headers: Mapping[str, Any]) -> datetime | None:
    """The earliest ``time`` among the ``x-death`` entries (broker dead-lettering only)."""
    times = [entry["time"] for entry in _deaths(headers) if isinstance(entry.get("time"), datetime)]
    return min((t if t.tzinfo else t.replace(tzinfo=UTC) for t in times), default=None)


def body_ids(body: bytes) -> tuple[str | None, str | None]:
    """``(tenant_id, event id)`` of a JSON object body; ids not matching the SPEC pattern
    (which could carry arbitrary input) are ``None``."""
    if len(body) > MAX_PARSED_BODY_BYTES:
        return None, None
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    tenant, event = data.get("tenant_id"), data.get("id")
    return (
        tenant if isinstance(tenant, str) and _ID.fullmatch(tenant) else None,
        event if isinstance(event, str) and _ID.fullmatch(event) else None,
    )


def replay_headers(headers: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """The original headers without the error and broker bookkeeping (the replayed event
    starts over at attempt 1), plus ``x-replayed-at``."""
    kept = {
        name: value
        for name, value in headers.items()
        if name not in REPLAY_DROPPED_HEADERS and not name.startswith(REPLAY_DROPPED_PREFIXES)
    }
    kept[REPLAYED_AT_HEADER] = now.isoformat()
    return kept
