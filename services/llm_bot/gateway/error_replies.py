"""Error replies of the gateway: OpenAI-style bodies carrying a request id, and the log
line that request id finds. Internal text (a provider's, a broker's) goes to the log only."""

from __future__ import annotations

import uuid

import structlog
from fastapi.responses import JSONResponse

from llm_bot.gateway.bus import BusOverloaded, BusUnavailable
from llm_bot.gateway.openai_wire import WireError
from llm_bot.redaction import redacted

log = structlog.get_logger(__name__)


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def request_id_header(request_id: str) -> dict[str, str]:
    return {"X-Request-Id": request_id}


OVERLOADED_RETRY_AFTER_SECONDS = 5


def unavailable(exc: BusUnavailable) -> WireError:
    if isinstance(exc, BusOverloaded):
        return WireError(
            503,
            "the service is overloaded; try again later",
            code="overloaded",
            detail=str(exc),
            retry_after=OVERLOADED_RETRY_AFTER_SECONDS,
        )
    return WireError(
        503, "the service is unavailable; try again later", code="unavailable", detail=str(exc)
    )


def log_error(error: WireError, request_id: str) -> None:
    """The log line a client's request id finds: internal detail here (a bounded, redacted
    excerpt: it may be a provider's or a broker's text), never in the body."""
    fields = {"request_id": request_id, "status": error.status, "code": error.code}
    if error.status >= 500:
        detail = redacted(error.detail or error.message)
        log.warning("gateway.request_failed", **fields, detail=detail)
    else:
        log.info("gateway.request_refused", **fields)


def error_response(error: WireError, request_id: str) -> JSONResponse:
    log_error(error, request_id)
    headers = request_id_header(request_id)
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    if error.status == 413:  # close rather than read the rest of a body refused unread
        headers["Connection"] = "close"
    return JSONResponse(error.body(request_id), status_code=error.status, headers=headers)
