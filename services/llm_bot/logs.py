"""structlog configuration: JSON lines by default, a console renderer for humans.

Events are key-value (``log.info("candidate.published", ...)``); per-event ids are bound
with ``structlog.contextvars``. Message text is only logged by callers when
``LLM_BOT_LOG_CONTENT=true``; secrets never are.
"""

from __future__ import annotations

import logging
import sys
import traceback
from types import TracebackType
from typing import Literal

import structlog

from llm_bot.errors import LlmBotError, log_fields
from llm_bot.telemetry.tracing import current_ids

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _add_trace_ids(
    _: object, __: str, event: structlog.types.EventDict
) -> structlog.types.EventDict:
    """``trace_id``/``span_id`` of the current span, so logs and traces join up."""
    event.update(current_ids())
    return event


def redacted_exception(
    _: object, __: str, event: structlog.types.EventDict
) -> structlog.types.EventDict:
    """``exc_info`` rendered as ``exception``, as structlog's ``format_exc_info`` would, but
    each exception's message replaced by what :func:`llm_bot.errors.log_fields` keeps of it
    (an exception's text may be a provider's, with secrets or a user's words): the frames
    (this program's files and lines) stay whole."""
    exc_info = event.pop("exc_info", None)
    if not exc_info:
        return event
    error: BaseException | None
    if isinstance(exc_info, BaseException):
        error = exc_info
    elif isinstance(exc_info, tuple):
        error = exc_info[1]
    else:
        error = sys.exc_info()[1]
    if error is not None:
        event["exception"] = _render_chain(error)
    return event


def _render_chain(error: BaseException) -> str:
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = (
                current.__cause__,
                "The above exception was the direct cause of the following exception:",
            )
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = (
                current.__context__,
                "During handling of the above exception, another exception occurred:",
            )
        else:
            current = None
    parts: list[str] = []
    for index, (exc, _) in enumerate(reversed(chain)):
        if index:
            parts.append(f"\n{chain[len(chain) - index][1]}\n\n")
        parts.append(_render_one(exc, exc.__traceback__))
    return "".join(parts).rstrip("\n")


def _render_one(error: BaseException, tb: TracebackType | None) -> str:
    fields = log_fields(error)
    if not isinstance(error, LlmBotError):  # its text is all outside text: the excerpt
        text = fields.get("detail", "")
    elif "detail" in fields:
        text = f"{fields['error']} (detail: {fields['detail']})"
    else:
        text = fields["error"]
    frames = "".join(traceback.format_tb(tb)) if tb is not None else ""
    head = "Traceback (most recent call last):\n" if frames else ""
    return f"{head}{frames}{type(error).__qualname__}: {text}\n"


def configure_logging(*, level: str = "info", fmt: Literal["json", "console"] = "json") -> None:
    """Configure structlog (and the stdlib root logger, for libraries) once at start."""
    numeric = LEVELS.get(level, logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        redacted_exception,
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer()
    )
    # One PrintLogger for every logger (what PrintLoggerFactory would make anew each
    # time): loggers are assembled on every call (not cached, so structlog's testing
    # helpers see reconfiguration), and a PrintLogger holds only the file and its lock.
    printer = structlog.PrintLogger(file=sys.stderr)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=lambda *_: printer,
        cache_logger_on_first_use=False,
    )
    # Libraries (aio-pika, aiormq, openai) log through the stdlib: render them the same
    # way, so a JSON deployment gets only JSON lines (tracebacks folded into one field).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))
