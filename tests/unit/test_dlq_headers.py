"""Reading dead-letter headers and rendering ``llm-bot dlq`` output, without a broker."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from llm_bot.adapters import dead_letter_headers as dl
from llm_bot.adapters.rabbit_dlq import DeadLetter, ReplayResult
from llm_bot.entrypoints.dlq_cli import render_line, render_list, render_replay

T1 = datetime(2025, 7, 30, 10, 30, tzinfo=UTC)
T2 = datetime(2025, 7, 30, 11, 0, tzinfo=UTC)


def _death(reason: str | bytes, time: datetime, queue: str = "llm-bot.in") -> dict[str, object]:
    return {"reason": reason, "queue": queue, "time": time, "count": 1, "exchange": ""}


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"x-error-code": "model_error", "x-death": [_death("rejected", T1)]}, "model_error"),
        ({"x-error-code": b"timeout"}, "timeout"),
        (
            {"x-death": [_death("delivery_limit", T2), _death("rejected", T1)]},
            "broker:delivery_limit",
        ),
        ({"x-death": [_death(b"rejected", T1)]}, "broker:rejected"),
        ({"x-first-death-reason": "expired"}, "broker:expired"),
        ({}, "unknown"),
    ],
    ids=["service", "bytes-code", "latest-death", "bytes-reason", "first-death-only", "none"],
)
def test_error_code_prefers_the_service_header_then_the_broker_reason(
    headers: dict[str, object], code: str
) -> None:
    """x-error-code wins; otherwise broker:<reason> of the most recent x-death entry."""
    assert dl.error_code(headers) == code


def test_broker_dead_letter_message_and_first_death() -> None:
    """A broker dead letter names its reason and queue; first death is the earliest time, in UTC."""
    naive = datetime(2025, 7, 30, 9, 0)  # header timestamps may lack a zone
    headers = {"x-death": [_death("delivery_limit", T2, "q.in"), _death("rejected", naive)]}
    assert (
        dl.error_message(headers) == "dead-lettered by the broker (delivery_limit) from queue q.in"
    )
    assert dl.first_death(headers) == naive.replace(tzinfo=UTC)
    assert dl.first_death({"x-error-code": "internal"}) is None
    assert dl.error_message({"x-error-code": "internal", "x-error-message": "boom"}) == "boom"
    assert (dl.attempts({"x-attempts": 3}), dl.attempts({"x-attempts": True})) == (3, None)


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        (b'{"id": "evt_1", "tenant_id": "store_001", "text": "hi"}', ("store_001", "evt_1")),
        (b'{"id": "evt\\u001b[2J", "tenant_id": "../x"}', (None, None)),
        (b"[" * 50000, (None, None)),
        (b"\xff\xfe", (None, None)),
        (b'["evt_1"]', (None, None)),
    ],
    ids=["valid", "unsafe-ids", "deep-nesting", "not-utf8", "not-object"],
)
def test_body_ids_only_reads_valid_ids(body: bytes, ids: tuple[str | None, str | None]) -> None:
    """Only ids matching the SPEC pattern are read from a body; anything else gives None."""
    assert dl.body_ids(body) == ids


def test_replay_headers_drop_error_and_broker_bookkeeping() -> None:
    """x-error-*, x-attempts, x-death, x-first/last-death-* and x-delivery-count go; others stay."""
    headers = {
        "x-error-code": "model_error",
        "x-error-message": "model returned HTTP 400",
        "x-attempts": 1,
        "x-death": [_death("rejected", T1)],
        "x-first-death-reason": "rejected",
        "x-last-death-queue": "q",
        "x-delivery-count": 4,
        "traceparent": "00-abc-def-01",
        "x-custom": "kept",
    }
    replayed = dl.replay_headers(headers, now=T2)
    assert replayed == {
        "traceparent": "00-abc-def-01",
        "x-custom": "kept",
        "x-replayed-at": "2025-07-30T11:00:00+00:00",
    }


LETTER = DeadLetter(
    position=1,
    message_id="evt_1",
    correlation_id="conv_1",
    code="invalid_event",
    error_message="invalid JSON: EOF",
    attempts=1,
    body_size=37,
    first_death=None,
    tenant_id="store_001",
    event_id="evt_1",
)


def test_text_line_is_one_printable_line() -> None:
    """Control characters in ids or messages cannot break the line or reach the terminal."""
    line = render_line(
        replace(LETTER, message_id="a\nb\x1b[2J", error_message="x" * 500, first_death=T1)
    )
    assert "\n" not in line
    assert "\x1b" not in line
    assert line.startswith("#1 code=invalid_event attempts=1 size=37 message_id=a?b?[2J ")
    assert "first_death=2025-07-30T10:30:00+00:00" in line
    assert len(line) < 400


def test_list_json_lines_and_text_summary() -> None:
    """--json prints exactly one JSON object per dead letter; text mode adds a summary line."""
    letters = [LETTER, replace(LETTER, position=2, first_death=T1, code="broker:rejected")]
    rows = [json.loads(x) for x in render_list(letters, depth=5, queue="q.dlq", as_json=True)]
    assert [row["code"] for row in rows] == ["invalid_event", "broker:rejected"]
    assert rows[1]["first_death"] == "2025-07-30T10:30:00+00:00"
    text = list(render_list(letters, depth=5, queue="q.dlq", as_json=False))
    assert text[-1] == "2 of 5 dead letters shown from q.dlq (nothing removed)"


@pytest.mark.parametrize(
    ("result", "limit", "code", "line"),
    [
        (
            ReplayResult(3, 2, depth_before=5),
            None,
            "model_error",
            "replayed 3, left 2 (code != model_error)",
        ),
        (ReplayResult(1, 0, depth_before=5), 1, None, "replayed 1, left 4 (--limit 1)"),
        (ReplayResult(4, 0, depth_before=4), None, None, "replayed 4, left 0"),
        (ReplayResult(0, 0, depth_before=0), 10, "timeout", "replayed 0, left 0"),
    ],
    ids=["by-code", "limit", "all", "empty"],
)
def test_replay_summary(
    result: ReplayResult, limit: int | None, code: str | None, line: str
) -> None:
    """The replay summary says how many moved, how many stayed, and why."""
    assert render_replay(result, limit=limit, code=code) == line
