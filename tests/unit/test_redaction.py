"""Provider text stays inside (issue 44, item 2): one redaction (``llm_bot.redaction``)
serves every path text from outside can take. The bus (ErrorV1 ``message``) and the dead
letter (``x-error-message``) get the error's own fixed text; logs (``event.retrying``,
``event.failed``, ``gateway.request_failed``, any rendered traceback) a bounded, redacted
excerpt with a digest. A planted secret never comes out of any of them."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_bot.errors import ModelUnavailable, log_fields
from llm_bot.gateway.error_replies import log_error
from llm_bot.gateway.openai_wire import WireError
from llm_bot.redaction import EXCERPT_CHARS, MARK, redacted
from llm_bot.service.broker_actions import CopyToDeadLetters, PublishError, broker_actions
from llm_bot.service.outcomes import EventIds, outcome_for_error
from tests.support.logs import rendered_logs

IDS = EventIds("e1", "t1", "u1", "c1")
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"
PROVIDER_TEXT = (
    f"upstream rejected key {SECRET}: Traceback (most recent call last): "
    'File "/srv/provider/app.py", line 88, in stream'
)


def _bus_and_dead_letter(error: Exception) -> str:
    """What the bus and the dead letter carry for ``error``: ErrorV1's JSON and the headers."""
    outcome = outcome_for_error(error, ids=IDS, attempts=3)
    texts = []
    for action in broker_actions(outcome):
        if isinstance(action, PublishError):
            texts.append(action.error.model_dump_json())
        elif isinstance(action, CopyToDeadLetters):
            texts.append(
                json.dumps({"x-error-code": action.code, "x-error-message": action.reason})
            )
    assert len(texts) == 2
    return "\n".join(texts)


def _raised(error: BaseException) -> BaseException:
    """``error`` with a traceback, as if raised."""
    try:
        raise error  # noqa: TRY301 - raised only to carry a traceback
    except BaseException as exc:  # noqa: BLE001 - handed back to be rendered
        return exc


def _logged(error: Exception) -> str:
    """The JSON lines of ``event.retrying`` and ``event.failed`` (with the traceback the
    service renders for an unexpected error) and ``gateway.request_failed`` for ``error``."""
    log = structlog.get_logger("test")
    with rendered_logs() as buffer:
        log.warning("event.retrying", code="model_error", **log_fields(error))
        log.warning("event.failed", **log_fields(error), exc_info=_raised(error))
        detail = str(error)
        log_error(WireError(502, "the model failed", code="model_error", detail=detail), "req_1")
    return buffer.getvalue()


def test_the_excerpt_keeps_plain_words_and_short_numbers_and_ends_with_a_digest() -> None:
    text = "model returned HTTP 503: overloaded, key sk-abc123def456 at /srv/x.py"
    excerpt = redacted(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert excerpt == (
        f"model returned HTTP 503: overloaded, key {MARK} at {MARK} (sha256:{digest}, {len(text)} chars)"
    )


def test_the_excerpt_is_bounded_and_drops_invisible_and_bidi_characters() -> None:
    assert len(redacted("word " * 1000)) < EXCERPT_CHARS + 40
    assert "\u202e" not in redacted("hello \u202eevil\u202c world")
    assert "\u200b" not in redacted("zero\u200bwidth")


def test_the_bus_and_the_dead_letter_carry_the_errors_own_text_only() -> None:
    error = ModelUnavailable("model stream failed", detail=PROVIDER_TEXT)
    carried = _bus_and_dead_letter(error)
    assert "model stream failed" in carried
    assert SECRET not in carried
    assert "/srv/provider" not in carried
    unexpected = _bus_and_dead_letter(KeyError(PROVIDER_TEXT))
    assert "unexpected KeyError" in unexpected
    assert SECRET not in unexpected


def test_retrying_failed_and_gateway_log_lines_keep_a_redacted_excerpt() -> None:
    for error in (
        ModelUnavailable("model stream failed", detail=PROVIDER_TEXT),
        ValueError(SECRET),
    ):
        lines = [json.loads(line) for line in _logged(error).splitlines()]
        assert [line["event"] for line in lines] == [
            "event.retrying",
            "event.failed",
            "gateway.request_failed",
        ]
        assert all(SECRET not in json.dumps(line) for line in lines)
        assert all("sha256:" in line["detail"] for line in lines)
        assert "Traceback" in lines[1]["exception"]  # the frames stay, the text does not


def test_a_chained_exceptions_text_is_redacted_in_the_rendered_traceback() -> None:
    def fail() -> None:
        cause = _raised(RuntimeError(f"provider said {SECRET}"))
        raise ModelUnavailable("model stream failed", detail=str(cause)) from cause

    log = structlog.get_logger("test")
    with rendered_logs() as buffer:
        try:
            fail()
        except ModelUnavailable:
            log.exception("gateway.request_failed", request_id="req_2")
    [line] = [json.loads(text) for text in buffer.getvalue().splitlines()]
    assert "direct cause" in line["exception"]
    assert "ModelUnavailable: model stream failed" in line["exception"]
    assert SECRET not in buffer.getvalue()


_SECRET_CHARS = st.characters(categories=("L", "N", "P", "S"))
SECRETS = st.one_of(
    st.text(_SECRET_CHARS, min_size=12, max_size=60).filter(lambda s: any(c.isdigit() for c in s)),
    st.text(st.characters(categories=["L"]), min_size=20, max_size=60),
)
"""What a key, a token or a password looks like: 12 or more characters with a digit, or 20
or more letters."""


@settings(max_examples=150, deadline=None)
@given(before=st.text(max_size=80), secret=SECRETS, after=st.text(max_size=80))
def test_a_planted_secret_never_comes_out_of_any_path(before: str, secret: str, after: str) -> None:
    text = f"{before}{secret}{after}"
    error = ModelUnavailable("model stream failed", detail=text)
    assert secret not in redacted(text)
    assert secret not in _bus_and_dead_letter(error)
    assert secret not in _bus_and_dead_letter(RuntimeError(text))
    assert secret not in json.dumps(log_fields(error), ensure_ascii=False)
    assert secret not in json.dumps(log_fields(RuntimeError(text)), ensure_ascii=False)


def _log_calls() -> Iterator[tuple[str, ast.Call]]:
    package = Path(__file__).resolve().parents[2] / "services" / "llm_bot"
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "log"
            ):
                yield f"{path.relative_to(package)}:{node.lineno}", node


def test_no_log_line_carries_an_exceptions_text_as_is() -> None:
    """Every log call gives an error through ``log_fields`` (the one redaction), never as
    ``error=str(exc)``, and never names its fields twice."""
    raw, doubled = [], []
    for where, call in _log_calls():
        named = {keyword.arg for keyword in call.keywords if keyword.arg is not None}
        for keyword in call.keywords:
            value = keyword.value
            if (
                keyword.arg in {"error", "detail"}
                and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "str"
            ):
                raw.append(where)
            fields = keyword.arg is None and "log_fields" in ast.unparse(value)
            if fields and named & {"error", "error_type", "detail"}:
                doubled.append(where)
    assert raw == []
    assert doubled == []


def test_a_librarys_log_line_with_a_traceback_is_redacted_too() -> None:
    """uvicorn, aio-pika and openai log through the standard library: the same rendering."""
    with rendered_logs() as buffer:
        error = _raised(ValueError(PROVIDER_TEXT))
        logging.getLogger("uvicorn.error").error("Exception in ASGI application", exc_info=error)
    [line] = [json.loads(text) for text in buffer.getvalue().splitlines()]
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert "ValueError: upstream rejected key [" in line["exception"]
    assert SECRET not in buffer.getvalue()
