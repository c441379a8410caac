"""The OpenAI Chat Completions wire format as the gateway speaks it: request validation,
error bodies, completion objects and stream chunks.

Memory is server-side, so of ``messages`` only the newest (a user message) is taken; the
history a client resends is never re-ingested (SPEC 1). Sampling parameters
(``temperature``, ``max_tokens``, ...) are accepted and not forwarded: the service's model
configuration decides. ``tools`` are refused: tools are configured on the service
(``LLM_BOT_TOOLS_PATH``), not per request.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_bot.contract import CandidateV1, ErrorV1
from llm_bot.contract.identifiers import ID_PATTERN

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ERROR_STATUS: dict[str, int] = {
    "invalid_event": 400,
    "model_error": 502,
    "memory_unavailable": 503,
    "timeout": 504,
    "internal": 500,
}
PUBLIC_MESSAGES: dict[str, str] = {
    "model_error": "the model provider did not answer; try again later",
    "memory_unavailable": "the service's memory store is unavailable; try again later",
    "timeout": "the service did not finish the reply in time; the turn may still complete",
    "internal": "the service failed on this request",
}
"""What a client reads for an event that failed in the service: a stable text per code.
The service's own text (a provider's or a broker's error) goes to the log only, with the
request id the client is given."""


class WireError(Exception):
    """A request the gateway answers with an OpenAI-style error body.

    ``message`` is what the client reads; ``detail`` (internal: a provider's or a broker's
    error text) is logged only, never sent."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str | None = None,
        detail: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        """Seconds for a ``Retry-After`` header (429, 503), if the client should wait."""
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")
        self.detail = detail

    def body(self, request_id: str | None = None) -> dict[str, Any]:
        error: dict[str, Any] = {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }
        if request_id is not None:
            error["request_id"] = request_id
        return {"error": error}

    @classmethod
    def from_error_event(cls, error: ErrorV1) -> WireError:
        """The HTTP error for an event that failed in the service: an invalid event's
        reason (it is about the request), otherwise the code's stable text."""
        if error.code == "invalid_event":
            return cls(400, error.message, code=error.code)
        if error.code == "budget_exceeded":
            return insufficient_quota()
        code = error.code if error.code in PUBLIC_MESSAGES else "internal"
        return cls(
            ERROR_STATUS.get(code, 500), PUBLIC_MESSAGES[code], code=code, detail=error.message
        )


def insufficient_quota() -> WireError:
    """429 for a tenant whose token budget is spent (``LLM_BOT_TENANT_TOKEN_BUDGETS``), in
    OpenAI's shape for a spent quota: retrying before the next UTC day or month is futile."""
    return WireError(
        429,
        "You exceeded your current quota: this account's token budget is spent until the "
        "next UTC day or month",
        code="insufficient_quota",
        kind="insufficient_quota",
    )


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


MAX_MESSAGES = 2048
"""History a client resends beyond this is refused (400): only the last message is used,
and validating a huge list costs the one event loop every client shares."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    messages: list[_Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    user: str | None = None
    safety_identifier: str | None = None
    metadata: dict[str, str] | None = None
    n: int | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None


@dataclass(frozen=True)
class ChatRequest:
    """A validated request: what the gateway publishes, and how to answer."""

    model: str
    text: str
    user_id: str
    conversation_id: str
    stream: bool
    include_usage: bool
    metadata: dict[str, str]


def parse_request(
    body: Any, headers: dict[str, str], *, bound_user: str | None = None
) -> ChatRequest:
    """Validate a ``/v1/chat/completions`` body; ``WireError`` (400) naming the parameter.

    ``bound_user``: the one user the caller's credential acts as (a user-bound key, a user
    token); a request naming another user is refused (403), one naming none acts as it."""
    if not isinstance(body, dict):
        raise WireError(400, "the request body must be a JSON object")
    try:
        request = _Request.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"])
        raise WireError(400, f"{param}: {first['msg']}", param=param) from exc
    if request.n not in (None, 1):
        raise WireError(400, "n: only one choice is generated", param="n")
    if request.tools or request.functions:
        param = "tools" if request.tools else "functions"
        raise WireError(
            400,
            f"{param}: this gateway does not take tools per request; tools are configured "
            "on the service (LLM_BOT_TOOLS_PATH)",
            param=param,
            code="unsupported_parameter",
        )
    last = request.messages[-1]
    index = len(request.messages) - 1
    if last.role != "user":
        raise WireError(
            400,
            f"messages[{index}]: the last message must be the user's (role 'user'); the "
            "conversation's history is kept by the service",
            param=f"messages.{index}.role",
        )
    text = _text_of(last.content, index)
    metadata = dict(request.metadata or {})
    conversation = metadata.pop("conversation_id", None) or headers.get("x-conversation-id")
    return ChatRequest(
        model=request.model,
        text=text,
        user_id=_user(request, headers, bound_user),
        conversation_id=_identifier(
            conversation,
            "metadata.conversation_id",
            "set metadata.conversation_id (or the X-Conversation-Id header)",
        ),
        stream=request.stream,
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        metadata=metadata,
    )


def _user(request: _Request, headers: dict[str, str], bound: str | None) -> str:
    named = [u for u in (request.user, request.safety_identifier, headers.get("x-user-id")) if u]
    if bound is None:
        return _identifier(
            named[0] if named else None, "user", "set 'user' (or the X-User-Id header)"
        )
    if any(user != bound for user in named):
        raise WireError(
            403,
            "user: this credential acts for one user only, and the request names another",
            param="user",
            code="user_not_allowed",
            kind="permission_error",
        )
    return bound


def _text_of(content: str | list[dict[str, Any]] | None, index: int) -> str:
    param = f"messages.{index}.content"
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise WireError(400, f"{param}: only text parts are supported", param=param)
            parts.append(part["text"])
        content = "\n".join(parts)
    if not content or not content.strip():
        raise WireError(400, f"{param}: the user message has no text", param=param)
    return content


def _identifier(value: str | None, param: str, hint: str) -> str:
    if not value:
        raise WireError(400, f"{param}: missing; {hint}", param=param)
    if re.fullmatch(ID_PATTERN, value) is None:
        raise WireError(
            400,
            f"{param}: must be 1-128 characters of letters, digits and ._:@- starting with a "
            "letter or digit",
            param=param,
        )
    return value


def completion_id(event_id: str) -> str:
    return f"chatcmpl-{event_id}"


def completion(candidate: CandidateV1, *, model: str, event_id: str) -> dict[str, Any]:
    """A ``chat.completion`` object for a final candidate."""
    message: dict[str, Any] = {"role": "assistant", "content": candidate.text, "refusal": None}
    finish = "stop"
    if candidate.tool_calls:
        message["tool_calls"] = [_tool_call(call) for call in candidate.tool_calls]
        finish = "tool_calls"
    return {
        "id": completion_id(event_id),
        "object": "chat.completion",
        "created": int(candidate.created_at.timestamp()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage(candidate),
    }


def usage(candidate: CandidateV1) -> dict[str, Any]:
    used = candidate.usage
    return {
        "prompt_tokens": used.input_tokens,
        "completion_tokens": used.output_tokens,
        "total_tokens": used.input_tokens + used.output_tokens,
        "prompt_tokens_details": {"cached_tokens": used.cached_input_tokens},
    }


def _tool_call(call: Any) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


@dataclass
class ChunkWriter:
    """Builds the ``chat.completion.chunk`` objects of one streamed completion."""

    event_id: str
    model: str
    created: int = 0
    started: bool = False

    def __post_init__(self) -> None:
        self.created = self.created or int(time.time())

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id(self.event_id),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def text(self, piece: str) -> dict[str, Any]:
        """A content chunk (the first one also carries the role)."""
        delta: dict[str, Any] = {"content": piece}
        if not self.started:
            delta = {"role": "assistant", **delta}
            self.started = True
        return self._chunk(delta)

    def finish(self, candidate: CandidateV1) -> list[dict[str, Any]]:
        """The closing chunks: tool calls (if any) and the finish reason."""
        chunks: list[dict[str, Any]] = []
        if not self.started:
            chunks.append(self.text(""))
        if candidate.tool_calls:
            calls = [
                {"index": n, **_tool_call(call)} for n, call in enumerate(candidate.tool_calls)
            ]
            chunks.append(self._chunk({"tool_calls": calls}))
        chunks.append(self._chunk({}, "tool_calls" if candidate.tool_calls else "stop"))
        return chunks

    def usage(self, candidate: CandidateV1) -> dict[str, Any]:
        """The usage chunk (``stream_options.include_usage``): no choices."""
        return {**self._chunk({}), "choices": [], "usage": usage(candidate)}
