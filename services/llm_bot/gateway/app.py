"""The gateway's public HTTP API (FastAPI on uvicorn): ``POST /v1/chat/completions`` and
``GET /v1/models``. ``/healthz``, ``/readyz`` and ``/metrics`` are served on the internal
port only (``LLM_BOT_HTTP_PORT``, see ``entrypoints/gateway.py``).

Each completion request becomes one ``message`` event on the ingress, published with this
gateway's reply address; the reply (streamed deltas, then the final candidate, or an error)
comes back over the bus. The request's SERVER span is the parent of the event's trace.

A streaming response starts only when the first reply arrives, so an event that fails
before any text gets a proper HTTP error status; after that, failures end the stream with an
OpenAI-style error event. A client that disconnects loses nothing: the event is on the
queue, the turn completes and is remembered; only the rest of its stream is dropped.

Every response carries ``X-Request-Id``; an error body carries it too
(``error.request_id``), and the log line of the error names the same id. A client never
reads internal error text (a provider's, a broker's, an exception's): that goes to the log.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from pydantic import ValidationError

from llm_bot.auth_throttle import AuthThrottle, ThrottleSettings
from llm_bot.contract import CandidateV1, InternalEventV2
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.gateway.authentication import Door, authenticated
from llm_bot.gateway.bus import BusUnavailable, GatewayBus
from llm_bot.gateway.credentials import Credentials
from llm_bot.gateway.error_replies import (
    error_response,
    new_request_id,
    request_id_header,
    unavailable,
)
from llm_bot.gateway.openai_wire import (
    PUBLIC_MESSAGES,
    ChatRequest,
    WireError,
    completion,
    parse_request,
)
from llm_bot.gateway.request_body import json_body
from llm_bot.gateway.request_limits import LimitSettings, Release, RequestLimits
from llm_bot.gateway.sse_stream import ClosingStream, ReplyStream, next_reply
from llm_bot.gateway.tenant_personas import TenantPersonas
from llm_bot.gateway.token_quota import TokenQuota
from llm_bot.telemetry.gateway_metrics import GatewayMetrics
from llm_bot.telemetry.tracing import inject_context

log = structlog.get_logger(__name__)

REFUSAL_DELAY_SECONDS = 1.0
"""A request refused for a rate limit is answered after this long (its connection is
held, nothing else): a client that loops on 429 without honouring ``Retry-After`` makes
one request a second per connection instead of thousands, and its refusals stop costing
the gateway's one event loop what other clients need (tests/bench/gateway_probes.py)."""


@dataclass(frozen=True)
class GatewaySettings:
    credentials: Credentials
    timeout_seconds: float
    model_ids: tuple[str, ...]
    max_body_bytes: int = 262_144
    """The service's ``LLM_BOT_MAX_BODY_BYTES``: a larger request is refused with 413
    before anything is published (the consumer would refuse what it became)."""
    personas: TenantPersonas = field(default_factory=TenantPersonas)
    quota: TokenQuota | None = None
    """Tenants' token budgets: a spent one is 429 before publishing (None: no budgets)."""
    limits: RequestLimits = field(default_factory=lambda: RequestLimits(LimitSettings()))
    """Per-key and per-user requests per minute and in flight (none by default here)."""
    throttle: AuthThrottle = field(
        default_factory=lambda: AuthThrottle(ThrottleSettings(max_failures=0), "gateway")
    )
    """Failed-authentication throttling per client address and key prefix (off here)."""

    @cached_property
    def door(self) -> Door:
        """The credentials, limits and throttle every authenticated path checks."""
        return Door(credentials=self.credentials, limits=self.limits, throttle=self.throttle)


def create_app(
    *,
    bus: GatewayBus,
    settings: GatewaySettings,
    metrics: GatewayMetrics,
    tracer: Tracer,
) -> FastAPI:
    app = FastAPI(title="llm-bot gateway", docs_url=None, redoc_url=None, openapi_url=None)
    completions = _Completions(bus=bus, settings=settings, metrics=metrics, tracer=tracer)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await completions.handle(request)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        request_id = new_request_id()
        try:
            authenticated(request, settings.door)
        except WireError as exc:
            return await refusal(exc, request_id)
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "llm-bot"}
            for model in settings.model_ids
        ]
        return JSONResponse({"object": "list", "data": data}, headers=request_id_header(request_id))

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
        request_id = new_request_id()
        span = self._tracer.start_span(
            "POST /v1/chat/completions",
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": "POST",
                "http.route": "/v1/chat/completions",
                "url.path": request.url.path,
                "llmbot.request_id": request_id,
            },
        )
        self._metrics.in_flight.inc()
        stream = False
        release: Release = _nothing
        try:
            caller = authenticated(request, self._settings.door)  # before the body: cheap
            headers = {k.lower(): v for k, v in request.headers.items()}
            body = await json_body(request, self._settings.max_body_bytes)
            chat = parse_request(body, headers, bound_user=caller.user)
            stream = chat.stream
            _check_persona(chat, caller.tenant, self._settings.personas)
            release = self._settings.limits.admit(caller.identity, caller.tenant, chat.user_id)
            if self._settings.quota is not None:
                await self._settings.quota.check(caller.tenant)
            event = _event(chat, caller.tenant, headers)
            span.set_attribute("llmbot.event_id", event.id)
            return await self._answer(chat, event, span, started, request_id, release=release)
        except WireError as exc:
            self._finish(span, started, stream, exc.status, release=release)
            return await refusal(exc, request_id)
        except Exception:
            log.exception("gateway.request_failed", request_id=request_id, status=500)
            self._finish(span, started, stream, 500, release=release)
            internal = WireError(500, PUBLIC_MESSAGES["internal"], code="internal")
            return JSONResponse(
                internal.body(request_id), 500, headers=request_id_header(request_id)
            )
        except BaseException:
            self._finish(span, started, stream, 500, release=release)
            raise

    async def _answer(
        self,
        chat: ChatRequest,
        event: InternalEventV2,
        span: Span,
        started: float,
        request_id: str,
        *,
        release: Release,
    ) -> Response:
        deadline = started + self._settings.timeout_seconds
        carrier: dict[str, object] = {}
        with trace.use_span(span, end_on_exit=False):
            inject_context(carrier)  # the event's trace continues this request's span
        listening = AsyncExitStack()
        try:
            wait = await listening.enter_async_context(self._bus.request(event, carrier))
        except BusUnavailable as exc:
            raise unavailable(exc) from exc
        try:
            first = await next_reply(wait, deadline)
            if not chat.stream:
                candidate = first
                while not isinstance(candidate, CandidateV1):
                    candidate = await next_reply(wait, deadline)
                await listening.aclose()
                self._finish(span, started, False, 200, release=release)
                return JSONResponse(
                    completion(candidate, model=chat.model, event_id=event.id),
                    headers=request_id_header(request_id),
                )
        except BaseException:
            await listening.aclose()
            raise
        stream = ReplyStream(
            chat=chat,
            event_id=event.id,
            wait=wait,
            first=first,
            deadline=deadline,
            metrics=self._metrics,
            started=started,
            request_id=request_id,
        )

        closed = False

        async def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                await listening.aclose()
                self._finish(span, started, True, 200, ending=stream.ending, release=release)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for data in stream.events():
                    yield data
            finally:
                await close()

        return ClosingStream(
            body(),
            on_close=close,
            media_type="text/event-stream",
            headers={
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                **request_id_header(request_id),
            },
        )

    def _finish(
        self,
        span: Span,
        started: float,
        stream: bool,
        status: int,
        *,
        ending: str | None = None,
        release: Release | None = None,
    ) -> None:
        if release is not None:
            release()
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


async def refusal(error: WireError, request_id: str) -> Response:
    """The error reply; a rate-limit refusal is held a moment first (a client looping on
    429s slows down)."""
    if error.code == "rate_limit_exceeded":
        await asyncio.sleep(REFUSAL_DELAY_SECONDS)
    return error_response(error, request_id)


def _nothing() -> None:
    """The release of a request not yet admitted by the limits."""


def _check_persona(chat: ChatRequest, tenant: str, personas: TenantPersonas) -> None:
    """403 for a persona the tenant may not name; the refusal lists nothing that exists."""
    persona = chat.metadata.get("persona")
    if not personas.permits(tenant, persona):
        raise WireError(
            403,
            f"metadata.persona: {persona!r} is not available to this caller",
            param="metadata.persona",
            code="persona_not_allowed",
            kind="permission_error",
        )


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
