"""Reading a request's JSON body within bounds: its size (``LLM_BOT_MAX_BODY_BYTES``, 413),
the time it takes to arrive (408), and its nesting (400, checked before parsing)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from fastapi import Request

from llm_bot.gateway.openai_wire import WireError

BODY_READ_SECONDS = 10.0
"""A body sent slower than this (a slow-loris client) is refused with 408."""
MAX_JSON_DEPTH = 32
"""Nesting a chat request never needs; deeper is refused (400), never a RecursionError."""


async def json_body(request: Request, limit: int) -> Any:
    """The parsed body; ``WireError`` when it is too big, too slow, too deep or not JSON."""
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
    if nesting(raw) > MAX_JSON_DEPTH:
        raise WireError(400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise WireError(400, f"the request body is not JSON: {exc}") from exc


_OPENERS = re.compile(rb'[\[{]|[\]}]|"(?:[^"\\]|\\.)*"')


def nesting(raw: bytes | bytearray) -> int:
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
