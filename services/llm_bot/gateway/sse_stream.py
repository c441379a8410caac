"""The streamed body of a chat completion: the SSE chunks of one request's replies, and a
response that releases the request's reply wait however it ends."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1
from llm_bot.contract.stream_text import StreamText
from llm_bot.gateway.bus import BusUnavailable, ReplyWait
from llm_bot.gateway.error_replies import log_error, unavailable
from llm_bot.gateway.openai_wire import ChatRequest, ChunkWriter, WireError
from llm_bot.telemetry.gateway_metrics import GatewayMetrics


class ClosingStream(StreamingResponse):
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


class ReplyStream:
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
        request_id: str,
    ) -> None:
        self._chat = chat
        self._request_id = request_id
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
                reply = self._first or await next_reply(self._wait, self._deadline)
            except WireError as exc:
                self.ending = "timeout" if exc.code == "timeout" else "failed"
                log_error(exc, self._request_id)
                yield sse(exc.body(self._request_id))
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
            log_error(error, self._request_id)
            yield sse(error.body(self._request_id))
            return
        if rest:
            yield self._piece(rest)
        for chunk in self._chunks.finish(candidate):
            yield sse(chunk)
        if self._chat.include_usage:
            yield sse(self._chunks.usage(candidate))
        yield b"data: [DONE]\n\n"
        self.ending = "completed"

    def _piece(self, text: str) -> bytes:
        if not self._timed_first_token:
            self._timed_first_token = True
            self._metrics.time_to_first_token.observe(time.perf_counter() - self._started)
        return sse(self._chunks.text(text))


async def next_reply(wait: ReplyWait, deadline: float) -> CandidateDeltaV1 | CandidateV1:
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
        raise unavailable(exc) from exc
    if isinstance(reply, ErrorV1):
        raise WireError.from_error_event(reply)
    return reply


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"
