"""Reading a request's JSON body within bounds: its size (``LLM_BOT_MAX_BODY_BYTES``, 413),
the time it takes to arrive (408), and its nesting (400, checked before parsing)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import numpy as np
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
    if nesting(raw, stop_above=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise WireError(400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise WireError(400, f"the request body is not JSON: {exc}") from exc


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_FIRST_CHUNK = 1 << 12
_CHUNK = 1 << 16
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def nesting(raw: bytes | bytearray, *, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped), found
    before parsing: a parser recursing into a deep body is what this keeps away. Done in C
    (a regex blanking the strings, then numpy over the bytes, 64 KiB at a time): a body
    full of brackets costs a millisecond or two, not a Python loop per bracket. With
    ``stop_above``, returns as soon as the depth passes it."""
    if b"[" not in raw and b"{" not in raw:
        return 0
    codes = np.frombuffer(_STRINGS.sub(b'""', raw), dtype=np.uint8)
    depth = deepest = 0
    start, size = 0, _FIRST_CHUNK  # a small first look: deep bodies nest from the start
    while start < len(codes):
        levels = np.cumsum(_STEP[codes[start : start + size]], dtype=np.int32) + depth
        deepest = max(deepest, int(levels.max()))
        if stop_above is not None and deepest > stop_above:
            break
        depth = int(levels[-1])
        start, size = start + size, _CHUNK
    return max(0, deepest)
