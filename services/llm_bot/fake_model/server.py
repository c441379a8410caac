"""A real OpenAI-compatible HTTP server (aiohttp) that tests and ``llm-bot demo`` control.

Endpoints (all under ``/v1``): ``POST /chat/completions``, ``POST /responses``,
``POST /embeddings`` and ``GET /models``. Every request is recorded in
:attr:`FakeModelServer.requests`. Chat and Responses API requests consume one queued script step
(a reply text or a :class:`Fault`) each, FIFO; with an empty script the responder answers. The
default responder replies ``"echo: " + <last user message>[:200]`` (see
:func:`~llm_bot.fake_model.scripts.default_responder`). Structured-output requests
(``response_format`` / ``text.format`` of type ``json_schema`` or ``json_object``) get the
scripted text verbatim, so scripts may return JSON strings. ``stream: true`` is answered with
server-sent events shaped like OpenAI's (``streaming.py``), paced by :meth:`set_stream_rate`;
``Fault.cut`` drops the connection midway.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from llm_bot.fake_model.prompt_cache import PromptCache
from llm_bot.fake_model.responses import (
    BadRequestError,
    chat_completion_payload,
    chat_tool_calls_payload,
    embeddings_payload,
    error_response,
    estimate_tokens,
    models_payload,
    parse_json_object,
    rate_limited_response,
    request_model,
    response_payload,
)
from llm_bot.fake_model.scripts import (
    Fault,
    RecordedRequest,
    Reply,
    Responder,
    ToolCalls,
    default_responder,
)
from llm_bot.fake_model.streaming import chat_chunks, response_events, sse

__all__ = ["CHAT_PATH", "EMBEDDINGS_PATH", "RESPONSES_PATH", "FakeModelServer", "run_forever"]

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"

_SHUTDOWN_GRACE_SECONDS = 0.1

_log = logging.getLogger(__name__)

_Builder = Callable[[RecordedRequest, web.Request], Awaitable[web.StreamResponse]]


_CUT_AFTER = web.RequestKey("fake_model_cut_after", int)
_STREAM_ERROR = web.RequestKey("fake_model_stream_error", tuple[int, str])


class _Cut(Exception):
    """Raised to drop a connection the script told the server to cut."""


class FakeModelServer:
    """Scriptable fake of the OpenAI HTTP API bound to ``host:port`` (port 0 = any free port)."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, responder: Responder | None = None
    ) -> None:
        self._host = host
        self._port = port
        self._responder: Responder = responder or default_responder
        self._script: deque[str | ToolCalls | Fault] = deque()
        self._latency = 0.0
        self._limited_until = 0.0
        self._retry_after = 0.0
        self.rate_limited = 0
        """Requests answered 429 by :meth:`rate_limit`."""
        self._piece_interval = 0.0
        self._ids = itertools.count(1)
        self._inflight: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order, including faulted ones."""
        self._arrived = asyncio.Condition()
        """Notified as each request is recorded (see :meth:`requests_started`)."""
        self.prompt_cache = PromptCache()
        """Reports ``cached_tokens`` as OpenAI would (see ``prompt_cache.py``)."""

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind and start serving; afterwards :attr:`port` holds the real port."""
        if self._runner is not None:
            raise RuntimeError("fake model server already started")
        app = web.Application()
        app.router.add_post(CHAT_PATH, self._route(self._chat))
        app.router.add_post(RESPONSES_PATH, self._route(self._responses))
        app.router.add_post(EMBEDDINGS_PATH, self._route(self._embeddings))
        app.router.add_get(MODELS_PATH, self._route(self._models))
        runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_GRACE_SECONDS,
        )
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses
        if addresses:
            self._port = int(addresses[0][1])

    async def stop(self) -> None:
        """Stop serving; hung or delayed handlers are cancelled rather than awaited."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for task in list(self._inflight):
            task.cancel()
        await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        """The bound port (the requested one until :meth:`start` resolves port 0)."""
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``, ready for ``AsyncOpenAI(base_url=...)``."""
        if self._runner is None:
            raise RuntimeError("fake model server is not started")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}/v1"

    # ----------------------------------------------------------------- control

    def script(self, *steps: str | ToolCalls | Fault) -> None:
        """Queue reply texts and faults; each chat/responses request consumes one, FIFO."""
        self._script.extend(steps)

    def set_latency(self, seconds: float) -> None:
        """Delay every chat/responses reply by ``seconds`` (on top of any scripted delay)."""
        if seconds < 0:
            raise ValueError(f"latency must be >= 0, got {seconds}")
        self._latency = seconds

    def rate_limit(self, seconds: float, *, retry_after: float) -> None:
        """For the next ``seconds``, answer every chat, responses and embeddings request
        ``429`` with ``Retry-After`` (and ``retry-after-ms``) = ``retry_after``, as a
        provider does when a per-minute limit is hit (recorded, counted in
        :attr:`rate_limited`)."""
        if seconds < 0 or retry_after < 0:
            raise ValueError("seconds and retry_after must be >= 0")
        self._limited_until = time.monotonic() + seconds
        self._retry_after = retry_after

    def set_stream_rate(self, pieces_per_second: float) -> None:
        """Pace streamed replies: one text piece (about a token) per ``1 / rate`` seconds
        (0: as fast as the connection takes them)."""
        if pieces_per_second < 0:
            raise ValueError(f"stream rate must be >= 0, got {pieces_per_second}")
        self._piece_interval = 1.0 / pieces_per_second if pieces_per_second else 0.0

    def clear(self) -> None:
        """Forget recorded requests and any queued script steps (latency is kept)."""
        self.requests.clear()
        self._script.clear()
        self.prompt_cache.clear()

    @property
    def pending_script(self) -> int:
        """How many script steps are still queued."""
        return len(self._script)

    def chat_requests(self) -> list[RecordedRequest]:
        """Recorded ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.path == CHAT_PATH]

    def responses_requests(self) -> list[RecordedRequest]:
        """Recorded ``POST /v1/responses`` requests."""
        return [r for r in self.requests if r.path == RESPONSES_PATH]

    def embedding_requests(self) -> list[RecordedRequest]:
        """Recorded ``POST /v1/embeddings`` requests."""
        return [r for r in self.requests if r.path == EMBEDDINGS_PATH]

    async def requests_started(
        self, count: int, *, path: str = CHAT_PATH, within: float = 30.0
    ) -> list[RecordedRequest]:
        """Wait until ``count`` requests to ``path`` have arrived in all (each counts as
        soon as it is recorded, before its latency or scripted fault): a test waits for
        "the model was asked" instead of sleeping a guessed time. Raises ``TimeoutError``
        after ``within`` seconds."""

        def arrived() -> list[RecordedRequest]:
            return [r for r in self.requests if r.path == path]

        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(arrived()) >= count)
        return arrived()

    # ----------------------------------------------------------------- handlers

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def _record(self, request: web.Request) -> RecordedRequest | web.Response:
        parse_error: str | None = None
        try:
            body = parse_json_object(await request.text() if request.can_read_body else "")
        except BadRequestError as exc:
            body, parse_error = {}, str(exc)
        recorded = RecordedRequest(
            path=request.path,
            body=body,
            headers={k.lower(): v for k, v in request.headers.items()},
            received_at=time.time(),
        )
        self.requests.append(recorded)
        async with self._arrived:
            self._arrived.notify_all()
        return recorded if parse_error is None else error_response(400, parse_error)

    async def _reply_text(
        self, recorded: RecordedRequest, request: web.Request
    ) -> Reply | web.Response:
        """Consume one script step, apply latency/faults, and return the reply text or error
        (a scripted cut is left on the request as ``_CUT_AFTER``)."""
        step = self._script.popleft() if self._script else None
        if self._latency > 0:
            await asyncio.sleep(self._latency)
        if isinstance(step, str | ToolCalls):
            return step
        if step is not None:
            if step.kind == "status":
                return error_response(step.status_code, step.message)
            if step.kind == "stream_error":
                if not recorded.body.get("stream"):
                    return error_response(500, step.message)
                request[_STREAM_ERROR] = (step.after, step.message)
            await asyncio.sleep(step.seconds)
            if step.kind == "cut":
                request[_CUT_AFTER] = step.after
            if step.text is not None:
                return step.text
        try:
            return self._responder(recorded)
        except Exception as exc:  # noqa: BLE001 - any responder bug becomes an OpenAI-style 500
            _log.exception("fake model responder failed for %s", recorded.path)
            return error_response(500, f"fake model responder failed: {exc!r}")

    def _route(self, build: _Builder) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """Wrap an endpoint body with in-flight tracking, JSON parsing and recording."""

        async def handler(request: web.Request) -> web.StreamResponse:
            with self._tracked():
                recorded = await self._record(request)
                if isinstance(recorded, web.Response):
                    return recorded
                if time.monotonic() < self._limited_until and recorded.path != MODELS_PATH:
                    self.rate_limited += 1
                    return rate_limited_response(self._retry_after)
                try:
                    return await build(recorded, request)
                except _Cut:
                    if request.transport is not None:
                        request.transport.abort()
                    raise asyncio.CancelledError from None

        return handler

    async def _stream(
        self, request: web.Request, events: list[tuple[bytes, bool]]
    ) -> web.StreamResponse:
        """Send server-sent events, pacing those that carry a text piece; a scripted cut
        drops the connection after that many pieces."""
        cut_after: int | None = request.get(_CUT_AFTER)
        failure = request.get(_STREAM_ERROR)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        pieces = 0
        for data, is_piece in events:
            if is_piece:
                if cut_after is not None and pieces >= cut_after:
                    raise _Cut
                if failure is not None and pieces >= failure[0]:
                    break
                pieces += 1
                if self._piece_interval:
                    await asyncio.sleep(self._piece_interval)
            await response.write(data)
        if cut_after is not None:
            raise _Cut
        if failure is not None:  # an OpenAI-style error event, where the SDK raises APIError
            error = {"message": failure[1], "type": "server_error", "param": None, "code": None}
            await response.write(sse({"type": "error", "error": error}, event="error"))
        await response.write_eof()
        return response

    async def _chat(self, recorded: RecordedRequest, request: web.Request) -> web.StreamResponse:
        reply = await self._reply_text(recorded, request)
        if isinstance(reply, web.Response):
            return reply
        completion_id = f"chatcmpl-fake-{next(self._ids)}"
        model = request_model(recorded.body)
        prompt_tokens = estimate_tokens(recorded.prompt_text())
        created, cached = int(time.time()), self._cached_tokens(recorded)
        if isinstance(reply, ToolCalls):
            payload = chat_tool_calls_payload(
                completion_id=completion_id,
                model=model,
                calls=self._calls(reply),
                prompt_tokens=prompt_tokens,
                created=created,
                cached_tokens=cached,
            )
        else:
            payload = chat_completion_payload(
                completion_id=completion_id,
                model=model,
                text=reply,
                prompt_tokens=prompt_tokens,
                created=created,
                cached_tokens=cached,
            )
        if recorded.body.get("stream"):
            options = recorded.body.get("stream_options")
            usage = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = chat_chunks(payload, include_usage=usage)
            events = [(sse(chunk), piece) for chunk, piece in chunks]
            return await self._stream(request, [*events, (sse("[DONE]"), False)])
        if _CUT_AFTER in request:
            raise _Cut
        return web.json_response(payload)

    def _calls(self, reply: ToolCalls) -> list[tuple[str, str, str]]:
        """(id, name, arguments) of each call, numbering ids the script left out."""
        ids = reply.ids or tuple(f"call_{next(self._ids)}" for _ in reply.calls)
        return [
            (call_id, name, args) for call_id, (name, args) in zip(ids, reply.calls, strict=True)
        ]

    def _cached_tokens(self, recorded: RecordedRequest) -> int:
        key = recorded.body.get("prompt_cache_key")
        return self.prompt_cache.cached_tokens(
            key if isinstance(key, str) else None, recorded.prompt_text()
        )

    async def _responses(
        self, recorded: RecordedRequest, request: web.Request
    ) -> web.StreamResponse:
        reply = await self._reply_text(recorded, request)
        if isinstance(reply, web.Response):
            return reply
        n = next(self._ids)
        payload = response_payload(
            response_id=f"resp_fake_{n}",
            message_id=f"msg_fake_{n}",
            request=recorded.body,
            text="" if isinstance(reply, ToolCalls) else reply,
            input_tokens=estimate_tokens(recorded.prompt_text()),
            created=time.time(),
            cached_tokens=self._cached_tokens(recorded),
            calls=self._calls(reply) if isinstance(reply, ToolCalls) else None,
        )
        if recorded.body.get("stream"):
            events = response_events(payload)
            return await self._stream(
                request, [(sse(data, event=kind), piece) for kind, data, piece in events]
            )
        if _CUT_AFTER in request:
            raise _Cut
        return web.json_response(payload)

    async def _embeddings(self, recorded: RecordedRequest, _: web.Request) -> web.Response:
        try:
            return web.json_response(embeddings_payload(recorded.body))
        except BadRequestError as exc:
            return error_response(400, str(exc))

    async def _models(self, recorded: RecordedRequest, _: web.Request) -> web.Response:
        return web.json_response(models_payload(int(time.time())))


async def _serve(
    host: str,
    port: int,
    latency: float,
    on_ready: Callable[[str], None] | None,
    stream_rate: float = 0.0,
) -> None:
    stop_event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop_event.set)
    async with FakeModelServer(host=host, port=port) as server:
        server.set_latency(latency)
        server.set_stream_rate(stream_rate)
        _log.info("fake model server listening on %s", server.base_url)
        if on_ready is not None:
            on_ready(server.base_url)
        await stop_event.wait()
    _log.info("fake model server stopped")


def run_forever(
    host: str,
    port: int,
    latency: float = 0.0,
    *,
    on_ready: Callable[[str], None] | None = None,
    stream_rate: float = 0.0,
) -> None:
    """Serve with the default responder until SIGINT/SIGTERM (blocking; uses ``asyncio.run``).

    ``on_ready`` is called with the base URL once the socket is bound.
    """
    asyncio.run(_serve(host, port, latency, on_ready, stream_rate))
