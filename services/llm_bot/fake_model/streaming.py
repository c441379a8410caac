"""Server-sent events the fake model streams for ``stream: true``, shaped like OpenAI's.

Chat Completions: ``chat.completion.chunk`` objects (a role chunk, one chunk per text piece or
one per tool call, a finishing chunk, then a usage chunk when ``stream_options.include_usage``
is set), ending with ``data: [DONE]``. Responses API: typed events (``response.created``,
``response.output_text.delta`` per piece, ``response.completed`` carrying the whole response).

A reply is cut into pieces the way a tokenizer would roughly cut it: each word with the
whitespace before it, words longer than :data:`PIECE_CHARS` (or unspaced scripts such as Thai)
in runs of that many characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["PIECE_CHARS", "chat_chunks", "response_events", "sse", "text_pieces"]

PIECE_CHARS = 6
_WORDS = re.compile(r"(\s*)(\S+)|(\s+)")


def text_pieces(text: str) -> list[str]:
    """``text`` cut into token-like pieces whose concatenation is ``text``."""
    pieces: list[str] = []
    for space, word, trailing in _WORDS.findall(text):
        if trailing:
            pieces.append(trailing)
            continue
        runs = [word[i : i + PIECE_CHARS] for i in range(0, len(word), PIECE_CHARS)]
        pieces.extend([space + runs[0], *runs[1:]])
    return pieces


def sse(data: dict[str, Any] | str, *, event: str | None = None) -> bytes:
    """One server-sent event (``data:`` JSON, or a literal such as ``[DONE]``)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def chat_chunks(
    completion: dict[str, Any], *, include_usage: bool
) -> Iterator[tuple[dict[str, Any], bool]]:
    """The chunks that stream ``completion`` (a finished ``chat.completion`` object), each
    with whether it carries a text piece (the server paces those)."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
        "system_fingerprint": completion.get("system_fingerprint"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""}), False
    for piece in text_pieces(message.get("content") or ""):
        yield chunk({"content": piece}), True
    for index, call in enumerate(message.get("tool_calls") or ()):
        yield chunk({"tool_calls": [{"index": index, **call}]}), True
    yield chunk({}, choice["finish_reason"]), False
    if include_usage:
        yield {**head, "choices": [], "usage": completion["usage"]}, False


def response_events(response: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """``(event type, event, carries a text piece)`` streaming ``response`` (a completed
    Responses API object): created, each output item with its text deltas, completed."""
    sequence = iter(range(1_000_000))
    pending = {**response, "status": "in_progress", "output": [], "usage": None}

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any], bool]:
        return kind, {"type": kind, "sequence_number": next(sequence), **fields}, False

    yield event("response.created", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] != "message":
            yield event("response.output_item.added", output_index=index, item=item)
            yield event("response.output_item.done", output_index=index, item=item)
            continue
        text = "".join(part.get("text", "") for part in item["content"])
        yield event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        for piece in text_pieces(text):
            kind, data, _ = event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
            yield kind, data, True
        yield event(
            "response.output_text.done",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)
