"""JSON payloads the fake model server returns, shaped like the OpenAI API.

Token usage is an estimate, not a tokenizer: ``ceil(characters / 4)`` with a minimum of 1.
Prompt tokens count the characters of all message contents (see
:meth:`RecordedRequest.prompt_text`); completion tokens count the reply text.

Embeddings are a hashed bag of words: every lower-cased ``\\w+`` token adds ``±1`` to one of
``dimensions`` (default 64) buckets chosen by a BLAKE2b hash, and the vector is L2-normalised,
so texts sharing words get similar vectors and equal texts get equal vectors. A text without
words maps to the unit vector on bucket 0.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
from typing import Any

from aiohttp import web

__all__ = [
    "DEFAULT_EMBEDDING_DIMENSIONS",
    "DEFAULT_MODEL",
    "BadRequestError",
    "chat_completion_payload",
    "embed_text",
    "embeddings_payload",
    "error_payload",
    "error_response",
    "estimate_tokens",
    "models_payload",
    "parse_json_object",
    "request_model",
    "response_payload",
]

DEFAULT_MODEL = "fake-model"
"""Model name used when a request names none, and the one ``GET /v1/models`` lists."""

DEFAULT_EMBEDDING_DIMENSIONS = 64

_WORD = re.compile(r"\w+")
_RETRY_AFTER_STATUSES = frozenset({429, 503})


class BadRequestError(ValueError):
    """The request cannot be answered; the server turns it into an HTTP 400 error body."""


_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


def estimate_tokens(text: str) -> int:
    """Documented token estimate: ``ceil(len(text) / 4)``, at least 1."""
    return max(1, math.ceil(len(text) / 4))


def error_payload(status: int, message: str) -> dict[str, Any]:
    """OpenAI-style error body ``{"error": {"message", "type", "param", "code"}}``."""
    default_type = "server_error" if status >= 500 else "invalid_request_error"
    err_type, code = _ERROR_KINDS.get(status, (default_type, f"http_{status}"))
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def error_response(status: int, message: str) -> web.Response:
    """JSON error response; 429 and 503 carry ``Retry-After: 0`` so clients retry at once."""
    headers = {"Retry-After": "0"} if status in _RETRY_AFTER_STATUSES else None
    return web.json_response(error_payload(status, message), status=status, headers=headers)


def rate_limited_response(retry_after: float) -> web.Response:
    """A provider's 429 for a per-minute limit: wait ``retry_after`` seconds."""
    headers = {
        "Retry-After": f"{retry_after:g}",
        "retry-after-ms": f"{retry_after * 1000:.0f}",
        "x-ratelimit-reset-requests": f"{retry_after:g}s",
    }
    body = error_payload(429, "Rate limit reached for requests (fake model)")
    return web.json_response(body, status=429, headers=headers)


def parse_json_object(raw: str) -> dict[str, Any]:
    """Parse a request body (empty means ``{}``); :class:`BadRequestError` unless an object."""
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise BadRequestError("request body must be a JSON object")
    return parsed


def chat_completion_payload(
    *,
    completion_id: str,
    model: str,
    text: str,
    prompt_tokens: int,
    created: int,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    """A ``chat.completion`` object with one assistant choice finishing with ``stop``."""
    completion_tokens = estimate_tokens(text)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": "fp_fake_model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        },
    }


def chat_tool_calls_payload(
    *,
    completion_id: str,
    model: str,
    calls: list[tuple[str, str, str]],
    prompt_tokens: int,
    created: int,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    """A ``chat.completion`` whose assistant message asks for ``calls`` (id, name,
    arguments), finishing with ``tool_calls``."""
    payload = chat_completion_payload(
        completion_id=completion_id,
        model=model,
        text="",
        prompt_tokens=prompt_tokens,
        created=created,
        cached_tokens=cached_tokens,
    )
    choice = payload["choices"][0]
    choice["finish_reason"] = "tool_calls"
    choice["message"] = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ],
    }
    return payload


def response_payload(
    *,
    response_id: str,
    message_id: str,
    request: dict[str, Any],
    text: str,
    input_tokens: int,
    created: float,
    cached_tokens: int = 0,
    calls: list[tuple[str, str, str]] | None = None,
) -> dict[str, Any]:
    """A completed Responses API ``response`` object with one ``output_text`` message, or
    with ``function_call`` items for ``calls`` (id, name, arguments)."""
    output_tokens = estimate_tokens(text)
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "completed_at": created,
        "model": request_model(request),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "metadata": request.get("metadata") or {},
        "previous_response_id": request.get("previous_response_id"),
        "max_output_tokens": request.get("max_output_tokens"),
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "text": request.get("text") or {"format": {"type": "text"}},
        "truncation": "disabled",
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{message_id}_{n}",
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
            for n, (call_id, name, arguments) in enumerate(calls)
        ]
        if calls
        else [
            {
                "type": "message",
                "id": message_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def embed_text(text: str, dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS) -> list[float]:
    """Deterministic, L2-normalised hashed bag-of-words vector of length ``dimensions``."""
    if dimensions < 1:
        raise ValueError(f"dimensions must be >= 1, got {dimensions}")
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        vector[value % dimensions] += 1.0 if (value >> 63) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        return [1.0] + [0.0] * (dimensions - 1)
    return [x / norm for x in vector]


def _encode_base64(vector: list[float]) -> str:
    """Little-endian float32 bytes, base64-encoded, as the API sends ``encoding_format=base64``."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def request_model(body: dict[str, Any]) -> str:
    """The request's ``model`` when it is a non-empty string, else :data:`DEFAULT_MODEL`."""
    model = body.get("model")
    return model if isinstance(model, str) and model else DEFAULT_MODEL


def _input_texts(raw_input: Any) -> list[str]:
    """Embedding ``input``: a string, a list of strings, or token-id lists (joined as words)."""
    items = raw_input if isinstance(raw_input, list) else [raw_input]
    if raw_input is None or not items:
        raise BadRequestError("'input' must be a non-empty string or list")
    if all(isinstance(item, int) for item in items):
        items = [items]  # one pre-tokenised input
    return [
        " ".join(str(x) for x in item) if isinstance(item, list) else str(item) for item in items
    ]


def embeddings_payload(body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/embeddings`` answer: one ``embedding`` per input, in input order.

    Honours ``dimensions`` (default 64) and ``encoding_format`` (``float`` or ``base64``);
    raises :class:`BadRequestError` for a missing ``input`` or bad ``dimensions``.
    """
    texts = _input_texts(body.get("input"))
    dimensions = body.get("dimensions") or DEFAULT_EMBEDDING_DIMENSIONS
    if not isinstance(dimensions, int) or dimensions < 1:
        raise BadRequestError("'dimensions' must be a positive integer")
    as_base64 = body.get("encoding_format") == "base64"
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector = embed_text(text, dimensions)
        encoded: list[float] | str = _encode_base64(vector) if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    prompt_tokens = estimate_tokens("".join(texts))
    return {
        "object": "list",
        "data": data,
        "model": request_model(body),
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def models_payload(created: int) -> dict[str, Any]:
    """``GET /v1/models`` body listing :data:`DEFAULT_MODEL`."""
    return {
        "object": "list",
        "data": [
            {"id": DEFAULT_MODEL, "object": "model", "created": created, "owned_by": "llm-bot"}
        ],
    }
