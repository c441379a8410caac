"""The gateway's HTTP API (FastAPI on uvicorn): ``POST /v1/chat/completions``,
``GET /v1/models``, ``/healthz``, ``/readyz``, ``/metrics``.

Each completion request becomes one ``message`` event on the ingress, published with this
gateway's reply address; the reply (streamed deltas, then the final candidate, or an error)
comes back over the bus. The request's SERVER span is the parent of the event's trace.

A streaming response starts only when the first reply arrives, so an event that fails
before any text gets a proper HTTP error status; after that, failures end the stream with an
OpenAI-style error event. A client that disconnects loses nothing: the event is on the
queue, the turn completes and is remembered; only the rest of its stream is dropped.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from llm_bot.config import ID_PATTERN
from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1, InternalEventV2
from llm_bot.gateway.api_keys import ApiKeys
from llm_bot.gateway.bus import BusUnavailable, GatewayBus, ReplyWait
from llm_bot.gateway.openai_wire import (
    ChatRequest,
    ChunkWriter,
    WireError,
    completion,
    parse_request,
)
from llm_bot.gateway.stream_text import StreamText
from llm_bot.telemetry.gateway_metrics import GatewayMetrics
from llm_bot.telemetry.tracing import inject_context

log = structlog.get_logger(__name__)

BODY_READ_SECONDS = 10.0
"""A body sent slower than this (a slow-loris client) is refused with 408."""
MAX_JSON_DEPTH = 32
"""Nesting a chat request never needs; deeper is refused (400), never a RecursionError."""

Readiness = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class GatewaySettings:
    keys: ApiKeys
    timeout_seconds: float
    model_ids: tuple[str, ...]
    max_body_bytes: int = 262_144
    """The service's ``LLM_BOT_MAX_BODY_BYTES``: a larger request is refused with 413
    before anything is published (the consumer would refuse what it became)."""


def create_app(
    *,
    bus: GatewayBus,
    settings: GatewaySettings,
    metrics: GatewayMetrics,
    tracer: Tracer,
    readiness: dict[str, Readiness],
) -> FastAPI:
    app = FastAPI(title="llm-bot gateway", docs_url=None, redoc_url=None, openapi_url=None)
    completions = _Completions(bus=bus, settings=settings, metrics=metrics, tracer=tracer)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await completions.handle(request)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        try:
            _tenant(request, settings.keys)
        except WireError as exc:
            return _error_response(exc)
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "llm-bot"}
            for model in settings.model_ids
        ]
        return JSONResponse({"object": "list", "data": data})

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz() -> Response:
        reasons = {name: await check() for name, check in readiness.items()}
        failing = {name: why for name, why in reasons.items() if why is not None}
        if failing:
            text = "".join(f"{name}: {why}\n" for name, why in failing.items())
            return PlainTextResponse(text, status_code=503)
        return PlainTextResponse("ready\n")

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


class _Completions:
    def __init__(
        self,
        *,
        bus: GatewayBus,
        settings: GatewaySettings,
        metrics: GatewayMetrics,
        tracer: Tracer,
    ) -> None:
        self._bus = bus
        self._settings = settings
        self._metrics = metrics
        self._tracer = tracer

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        span = self._tracer.start_span(
            "POST /v1/chat/completions",
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": "POST",
                "http.route": "/v1/chat/completions",
                "url.path": request.url.path,
            },
        )
        self._metrics.in_flight.inc()
        stream = False
        try:
            tenant = _tenant(request, self._settings.keys)
            headers = {k.lower(): v for k, v in request.headers.items()}
            chat = parse_request(await _json_body(request, self._settings.max_body_bytes), headers)
            stream = chat.stream
            event = _event(chat, tenant, headers)
            span.set_attribute("llmbot.event_id", event.id)
            return await self._answer(chat, event, span, started)
        except WireError as exc:
            self._finish(span, started, stream, exc.status)
            return _error_response(exc)
        except BaseException:
            self._finish(span, started, stream, 500)
            raise

    async def _answer(
        self, chat: ChatRequest, event: InternalEventV2, span: Span, started: float
    ) -> Response:
        deadline = started + self._settings.timeout_seconds
        carrier: dict[str, object] = {}
        with trace.use_span(span, end_on_exit=False):
            inject_context(carrier)  # the event's trace continues this request's span
        listening = AsyncExitStack()
        try:
            wait = await listening.enter_async_context(self._bus.request(event, carrier))
        except BusUnavailable as exc:
            raise WireError(503, f"the service is unavailable: {exc}", code="unavailable") from exc
        try:
            first = await _next(wait, deadline)
            if not chat.stream:
                candidate = first
                while not isinstance(candidate, CandidateV1):
                    candidate = await _next(wait, deadline)
                await listening.aclose()
                self._finish(span, started, False, 200)
                return JSONResponse(completion(candidate, model=chat.model, event_id=event.id))
        except BaseException:
            await listening.aclose()
            raise
        stream = _Stream(
            chat=chat,
            event_id=event.id,
            wait=wait,
            first=first,
            deadline=deadline,
            metrics=self._metrics,
            started=started,
        )

        closed = False

        async def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                await listening.aclose()
                self._finish(span, started, True, 200, ending=stream.ending)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for data in stream.events():
                    yield data
            finally:
                await close()

        return _ClosingStream(
            body(),
            on_close=close,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def _finish(
        self,
        span: Span,
        started: float,
        stream: bool,
        status: int,
        *,
        ending: str | None = None,
    ) -> None:
        flag = "true" if stream else "false"
        self._metrics.requests.labels(str(status), flag).inc()
        self._metrics.duration.labels(flag).observe(time.perf_counter() - started)
        self._metrics.in_flight.dec()
        span.set_attribute("http.response.status_code", status)
        if ending is not None:
            self._metrics.stream_endings.labels(ending).inc()
            span.set_attribute("llmbot.stream.ending", ending)
        if status >= 500 or ending not in (None, "completed", "disconnected"):
            span.set_status(Status(StatusCode.ERROR))
        span.end()


class _ClosingStream(StreamingResponse):
    """A StreamingResponse that always runs ``on_close``: also when the client left before
    the body was iterated (Starlette then cancels the response and never starts the body,
    whose own ``finally`` would not run: the reply wait and the metrics would leak)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        on_close: Callable[[], Awaitable[None]],
        media_type: str,
        headers: dict[str, str],
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()


class _Stream:
    """The SSE body of one streaming request."""

    def __init__(
        self,
        *,
        chat: ChatRequest,
        event_id: str,
        wait: ReplyWait,
        first: CandidateDeltaV1 | CandidateV1,
        deadline: float,
        metrics: GatewayMetrics,
        started: float,
    ) -> None:
        self._chat = chat
        self._wait = wait
        self._first: CandidateDeltaV1 | CandidateV1 | None = first
        self._deadline = deadline
        self._metrics = metrics
        self._started = started
        self._chunks = ChunkWriter(event_id=event_id, model=chat.model)
        self._text = StreamText()
        self._timed_first_token = False
        self.ending = "disconnected"

    async def events(self) -> AsyncIterator[bytes]:
        while True:
            try:
                reply = self._first or await _next(self._wait, self._deadline)
            except WireError as exc:
                self.ending = "timeout" if exc.code == "timeout" else "failed"
                yield _sse(exc.body())
                return
            self._first = None
            if isinstance(reply, CandidateV1):
                async for data in self._final(reply):
                    yield data
                return
            piece = self._text.delta(reply.seq, reply.delta)
            if piece:
                yield self._piece(piece)

    async def _final(self, candidate: CandidateV1) -> AsyncIterator[bytes]:
        rest = self._text.final(candidate.text)
        if rest is None:
            self.ending = "contradicted"
            error = WireError(
                502,
                "the model's stream broke off and the retried call answered differently; "
                "the reply that counts (and is remembered) is the final one: send the "
                "request again with the same Idempotency-Key to receive it",
                code="stream_interrupted",
            )
            yield _sse(error.body())
            return
        if rest:
            yield self._piece(rest)
        for chunk in self._chunks.finish(candidate):
            yield _sse(chunk)
        if self._chat.include_usage:
            yield _sse(self._chunks.usage(candidate))
        yield b"data: [DONE]\n\n"
        self.ending = "completed"

    def _piece(self, text: str) -> bytes:
        if not self._timed_first_token:
            self._timed_first_token = True
            self._metrics.time_to_first_token.observe(time.perf_counter() - self._started)
        return _sse(self._chunks.text(text))


async def _next(wait: ReplyWait, deadline: float) -> CandidateDeltaV1 | CandidateV1:
    """The next delta or candidate; ``WireError`` for a failed event, a timeout or a lost
    connection."""
    try:
        async with asyncio.timeout(max(deadline - time.perf_counter(), 0.0)):
            reply = await wait.next()
    except TimeoutError as exc:
        raise WireError(
            504,
            "no reply within the gateway's timeout (LLM_BOT_GATEWAY_TIMEOUT_SECONDS); the "
            "turn still completes and is remembered",
            code="timeout",
        ) from exc
    except BusUnavailable as exc:
        raise WireError(503, f"the service is unavailable: {exc}", code="unavailable") from exc
    if isinstance(reply, ErrorV1):
        raise WireError.from_error_event(reply)
    return reply


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


def _error_response(error: WireError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _tenant(request: Request, keys: ApiKeys) -> str:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise WireError(
            401,
            "missing API key: send 'Authorization: Bearer <key>'",
            code="invalid_api_key",
        )
    tenant = keys.tenant_for(key.strip())
    if tenant is None:
        raise WireError(401, "incorrect API key provided", code="invalid_api_key")
    return tenant


async def _json_body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise WireError(413, f"the request body is over {limit} bytes")
    raw = bytearray()
    try:
        async with asyncio.timeout(BODY_READ_SECONDS):
            async for chunk in request.stream():
                raw.extend(chunk)
                if len(raw) > limit:
                    raise WireError(413, f"the request body is over {limit} bytes")
    except TimeoutError:
        raise WireError(
            408, f"the request body did not arrive within {BODY_READ_SECONDS:g} s"
        ) from None
    if _nesting(raw) > MAX_JSON_DEPTH:
        raise WireError(400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise WireError(400, f"the request body is not JSON: {exc}") from exc


_OPENERS = re.compile(rb'[\[{]|[\]}]|"(?:[^"\\]|\\.)*"')


def _nesting(raw: bytes | bytearray) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped), found
    before parsing: a parser recursing into a deep body is what this keeps away."""
    depth = deepest = 0
    for match in _OPENERS.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def _event(chat: ChatRequest, tenant: str, headers: dict[str, str]) -> InternalEventV2:
    event_id = headers.get("idempotency-key") or f"gw_{uuid.uuid4().hex}"
    if re.fullmatch(ID_PATTERN, event_id) is None:
        raise WireError(
            400,
            "Idempotency-Key: must be 1-128 characters of letters, digits and ._:@- "
            "starting with a letter or digit",
            param="Idempotency-Key",
        )
    try:
        return InternalEventV2.model_validate(
            {
                "schema": "internal.event.v2",
                "id": event_id,
                "type": "message",
                "tenant_id": tenant,
                "user_id": chat.user_id,
                "conversation_id": chat.conversation_id,
                "created_at": datetime.now(UTC),
                "source": {"platform": "openai-gateway"},
                "annotations": [{"kind": "prompt", "text": chat.text}],
                "metadata": dict(chat.metadata),
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"])
        raise WireError(400, f"{param}: {first['msg']}", param=param) from exc
