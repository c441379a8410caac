"""structlog configuration: JSON lines by default, a console renderer for humans.

Events are key-value (``log.info("candidate.published", ...)``); per-event ids are bound
with ``structlog.contextvars``. Message text is only logged by callers when
``LLM_BOT_LOG_CONTENT=true``; secrets never are.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

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


def configure_logging(*, level: str = "info", fmt: Literal["json", "console"] = "json") -> None:
    """Configure structlog (and the stdlib root logger, for libraries) once at start."""
    numeric = LEVELS.get(level, logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
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
