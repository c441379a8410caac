"""uvicorn's httptools protocol with the two deadlines it lacks: one for a request's headers,
one for the whole request.

uvicorn bounds a body only through the app, and idle keep-alive connections only after a
first response: a connection that sends nothing, or sends its headers a line a second
(slow loris), holds a connection slot (``LLM_BOT_GATEWAY_MAX_CONNECTIONS``) for as long as
it likes. Here:

- **headers**: a connection must finish a request's headers within ``header_seconds`` of
  opening (or of the request's first byte on a kept-alive connection); otherwise it gets
  408 (or, having sent nothing, is just closed) and is closed.
- **whole request**: once its headers are in, the response must be complete within
  ``request_seconds``; otherwise the connection is closed (with 504 when no response
  began). The app's own deadlines (the body read, the reply wait) come first; this one
  catches what they cannot, such as a client that stops reading a streamed response.

A connection is also refused (closed at once, before anything is read) when its client
address already holds ``max_per_address`` connections
(``LLM_BOT_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS``): without it, one address opening about
a hundred silent connections a second holds every slot of the connection cap for the
header deadline, and everyone else gets 503. The address is the socket's peer (never a
forwarded header: a client could name any address there).

The subclass keeps to uvicorn's protocol callbacks (``connection_made``,
``on_message_begin``, ``on_headers_complete``, ``on_response_complete``,
``connection_lost``) and the request cycle's ``response_started``/``disconnected`` flags.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from llm_bot.gateway.error_replies import new_request_id
from llm_bot.gateway.openai_wire import WireError

log = structlog.get_logger(__name__)

HEADER_READ_SECONDS = 10.0
"""A request's headers must arrive within this (from the connection's start or the
request's first byte)."""
RESPONSE_GRACE_SECONDS = 10.0
"""How long past ``LLM_BOT_GATEWAY_TIMEOUT_SECONDS`` a response may take to be written
before its connection is closed (a client that stopped reading)."""


class BoundedHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with a header deadline and a whole-request deadline."""

    header_seconds: float = HEADER_READ_SECONDS
    request_seconds: float = 75.0
    max_per_address: int = 0
    """Connections one peer address may hold at once (0: no cap)."""
    on_refused: ClassVar[tuple[Callable[[str], None], ...]] = ()
    """Told the address of each connection refused for the cap (a metric)."""
    held: ClassVar[dict[str, int]] = {}
    """Open connections per peer address (one dict per configured class, i.e. server)."""
    logged: ClassVar[dict[str, float]] = {}
    """When a refusal of each address was last logged (at most once a second each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if self.max_per_address and self.held.get(address, 0) >= self.max_per_address:
            self._refuse_connection(address)
            return
        self._address = address
        self.held[address] = self.held.get(address, 0) + 1
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        if self._header_timer is None:  # a kept-alive connection's next request
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_timers()
        self._request_begun = False
        self._request_timer = self.loop.call_later(self.request_seconds, self._request_too_slow)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        if not self.pipeline:  # else the next request's timers are already running
            self._cancel_timers()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        if self._address is not None:
            left = self.held.get(self._address, 1) - 1
            if left > 0:
                self.held[self._address] = left
            else:
                self.held.pop(self._address, None)
            self._address = None
        super().connection_lost(exc)

    def _refuse_connection(self, address: str) -> None:
        """Close a connection over its address's cap at once (nothing read, nothing sent)."""
        self.transport.close()
        for tell in self.on_refused:
            tell(address)
        now = time.monotonic()
        if now - self.logged.get(address, 0.0) >= 1.0:
            if len(self.logged) >= 1000:
                self.logged.clear()
            self.logged[address] = now
            log.warning(
                "gateway.connection_refused",
                client=address,
                reason="per_address",
                max_per_address=self.max_per_address,
            )

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_seconds, self._headers_too_slow)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._request_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._request_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._request_begun:
            log.info("gateway.headers_timeout", client=_peer(self.client))
            self._refuse(408, "the request headers did not arrive in time", "headers_timeout")
        else:
            self.transport.close()

    def _request_too_slow(self) -> None:
        self._request_timer = None
        if self.transport.is_closing():
            return
        request_id = new_request_id()
        log.warning("gateway.request_deadline", request_id=request_id, client=_peer(self.client))
        cycle = self.cycle
        started = cycle is not None and cycle.response_started
        if cycle is not None:
            cycle.disconnected = True  # the app's later writes go nowhere
        if started:
            self.transport.close()
        else:
            self._refuse(504, "the request did not complete in time", "timeout", request_id)

    def _refuse(self, status: int, message: str, code: str, request_id: str | None = None) -> None:
        body = json.dumps(WireError(status, message, code=code).body(request_id)).encode()
        reason = {408: b"Request Timeout", 504: b"Gateway Timeout"}[status]
        head = [
            b"HTTP/1.1 %d %s\r\n" % (status, reason),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n",
        ]
        if request_id is not None:
            head.append(b"x-request-id: %s\r\n" % request_id.encode())
        self.transport.write(b"".join([*head, b"\r\n", body]))
        self.transport.close()


def bounded_protocol(
    *,
    header_seconds: float,
    request_seconds: float,
    max_per_address: int = 0,
    on_refused: Callable[[str], None] | None = None,
) -> type[BoundedHttpProtocol]:
    """The protocol class uvicorn is given (``uvicorn.Config(http=...)``) with these
    deadlines and this cap per address (its own connection counts)."""
    return type(
        "ConfiguredBoundedHttpProtocol",
        (BoundedHttpProtocol,),
        {
            "header_seconds": header_seconds,
            "request_seconds": request_seconds,
            "max_per_address": max_per_address,
            "on_refused": () if on_refused is None else (on_refused,),
            "held": {},
            "logged": {},
        },
    )


def _peer(client: tuple[str, int] | None) -> str | None:
    return None if client is None else f"{client[0]}:{client[1]}"
