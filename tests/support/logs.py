"""The service's log lines as it renders them (its own structlog set-up, JSON lines),
captured for a test: what an operator's log store would hold."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

import structlog

from llm_bot.logs import configure_logging


@contextlib.contextmanager
def rendered_logs() -> Iterator[io.StringIO]:
    """What the service's own logging set-up (JSON lines) writes, captured."""
    buffer = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with contextlib.redirect_stderr(buffer):
        configure_logging(level="info", fmt="json")
    try:
        yield buffer
    finally:
        structlog.reset_defaults()
        root.handlers[:] = handlers
        root.setLevel(level)
