"""Recorded requests, scripted faults and the default responder of the fake model server.

The default responder answers ``"echo: " + <last user message text>[:200]``; when the request has
no user message the reply is ``"echo: "``. For the Responses API a string ``input`` counts as one
user message and ``instructions`` as a leading system message. The memory message (the ``user``
message that quotes remembered context after the system prompt, SPEC 5.3) is not a user's
message: :meth:`RecordedRequest.memory` reads it, and it is never the text echoed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from llm_bot.memory.memory_message import is_memory_message, read_memory

__all__ = [
    "DEFAULT_ECHO_LIMIT",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ToolCalls",
    "content_text",
    "default_responder",
]

DEFAULT_ECHO_LIMIT = 200
"""How many characters of the last user message the default responder echoes."""

FaultKind = Literal["status", "hang", "delay", "cut", "stream_error"]


def content_text(content: Any) -> str:
    """Flatten a message ``content`` (string, list of parts, or ``None``) into plain text.

    Parts are dicts such as ``{"type": "text", "text": ...}`` (chat) or
    ``{"type": "input_text", "text": ...}`` (Responses API); parts without a string ``text``
    (images, audio, files) contribute nothing.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "".join(texts)
    return str(content)


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the fake server received it.

    ``headers`` keys are lower-cased; ``received_at`` is Unix time in seconds; ``body`` is the
    parsed JSON object (``{}`` for bodiless or non-JSON requests).
    """

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float

    def messages(self) -> list[dict[str, Any]]:
        """Conversation messages of a chat or Responses API request, in order.

        Chat requests return ``body["messages"]``. Responses API requests turn ``instructions``
        into a leading system message, a string ``input`` into one user message, and keep the
        list items that carry a ``role`` (bare function-call items and the like are skipped).
        Other endpoints return ``[]``.
        """
        body = self.body
        raw_messages = body.get("messages")
        if isinstance(raw_messages, list):
            return [m for m in raw_messages if isinstance(m, dict)]
        if "input" not in body or self.path.endswith("/embeddings"):
            return []
        result: list[dict[str, Any]] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            result.append({"role": "system", "content": instructions})
        raw_input = body["input"]
        if isinstance(raw_input, str):
            result.append({"role": "user", "content": raw_input})
        elif isinstance(raw_input, list):
            result.extend(item for item in raw_input if isinstance(item, dict) and "role" in item)
        return result

    def prompt_text(self) -> str:
        """All message contents joined with newlines (chat ``messages`` or Responses ``input``)."""
        return "\n".join(content_text(m.get("content")) for m in self.messages())

    def last_user_text(self) -> str:
        """Text of the last ``role == "user"`` message that is not the memory message, or
        ``""`` when there is none."""
        for message in reversed(self.window()):
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    def memory(self) -> dict[str, Any] | None:
        """The JSON document of the request's memory message, or None when it has none."""
        return next((d for m in self.messages() if (d := read_memory(m)) is not None), None)

    def window(self) -> list[dict[str, Any]]:
        """The messages without the system message and the memory message: the window and
        the current turn."""
        return [
            m for m in self.messages() if m.get("role") != "system" and not is_memory_message(m)
        ]


@dataclass(frozen=True)
class ToolCalls:
    """A scripted (or responded) answer that asks for tools instead of text: each call is
    ``(name, arguments JSON)``; ids are ``call_<n>`` numbered by the server unless given."""

    calls: tuple[tuple[str, str], ...]
    ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, *calls: tuple[str, str], ids: tuple[str, ...] = ()) -> ToolCalls:
        if not calls:
            raise ValueError("ToolCalls needs at least one call")
        if ids and len(ids) != len(calls):
            raise ValueError("give an id for every call, or none")
        return cls(calls=tuple(calls), ids=ids)


Reply = str | ToolCalls
Responder = Callable[[RecordedRequest], Reply]
"""Produces the reply (text, or tool calls) for a request when no script step is queued."""


def default_responder(request: RecordedRequest) -> str:
    """Deterministic reply: ``"echo: "`` plus the first 200 chars of the last user message."""
    return f"echo: {request.last_user_text()[:DEFAULT_ECHO_LIMIT]}"


@dataclass(frozen=True)
class Fault:
    """A scripted misbehaviour for one chat/responses request; build it with the constructors.

    - ``Fault.status(code, message)`` answers with an OpenAI-style error body
      ``{"error": {"message", "type", "param", "code"}}``; 429 and 503 carry ``Retry-After: 0``.
    - ``Fault.hang(seconds)`` waits ``seconds`` (default one hour) and then answers normally;
      the wait is cancelled when the client disconnects or the server stops.
    - ``Fault.delay(seconds, text)`` waits ``seconds`` and then answers with ``text`` (or with
      the responder's reply when ``text`` is ``None``).
    - ``Fault.cut(after, text)`` starts answering (``text`` or the responder's reply), then
      drops the connection: a streamed reply after ``after`` text pieces, a plain one before
      its body.
    - ``Fault.stream_error(message, after)`` streams ``after`` text pieces of the reply, then
      an error event carrying ``message`` (what a provider sends when it fails mid-stream;
      the SDK raises ``APIError`` with that text); a request that does not stream gets a
      500 with ``message``.
    """

    kind: FaultKind
    status_code: int = 200
    message: str = ""
    seconds: float = 0.0
    text: str | None = None
    after: int = 0

    @classmethod
    def status(cls, code: int, message: str = "fake model injected error") -> Fault:
        """Answer with HTTP ``code`` and an OpenAI-style error JSON body."""
        if not 400 <= code <= 599:
            raise ValueError(f"fault status must be an HTTP error code (400-599), got {code}")
        return cls(kind="status", status_code=code, message=message)

    @classmethod
    def hang(cls, seconds: float = 3600.0) -> Fault:
        """Sleep ``seconds`` before answering, to drive client-side timeouts."""
        if seconds < 0:
            raise ValueError(f"hang seconds must be >= 0, got {seconds}")
        return cls(kind="hang", seconds=seconds)

    @classmethod
    def delay(cls, seconds: float, text: str | None = None) -> Fault:
        """Answer after ``seconds`` with ``text`` (``None`` means the responder's reply)."""
        if seconds < 0:
            raise ValueError(f"delay seconds must be >= 0, got {seconds}")
        return cls(kind="delay", seconds=seconds, text=text)

    @classmethod
    def stream_error(cls, message: str, after: int = 0) -> Fault:
        """Stream ``after`` pieces, then an error event with ``message``."""
        if after < 0:
            raise ValueError(f"stream_error after must be >= 0, got {after}")
        return cls(kind="stream_error", message=message, after=after)

    @classmethod
    def cut(cls, after: int, text: str | None = None) -> Fault:
        """Drop the connection after ``after`` streamed text pieces of the reply."""
        if after < 0:
            raise ValueError(f"cut after must be >= 0, got {after}")
        return cls(kind="cut", after=after, text=text)
