"""Shortening a message that alone exceeds the input budget (SPEC 5.3), visibly."""

from __future__ import annotations


def shorten_middle(text: str, keep: int) -> str:
    """``text`` with its middle replaced by a marker saying how much was left out, keeping
    ``keep`` characters (the first half from its start, the rest from its end); ``text``
    itself when it is not longer than ``keep``. The start usually says what is asked and
    the end what is wanted, so both are kept."""
    if keep >= len(text):
        return text
    keep = max(keep, 0)
    head = text[: (keep + 1) // 2]
    tail = text[len(text) - keep // 2 :] if keep // 2 else ""
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n…[{omitted} characters left out to fit the context budget]…\n{tail}"
