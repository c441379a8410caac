"""Jinja2 templates from the package, autoescaped; every value shown goes through
``visible``: Unicode bidi and other control characters are shown as ``⟨U+202E⟩`` marks,
so text renders as text (it cannot reorder or hide what surrounds it)."""

from __future__ import annotations

import unicodedata
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

_SHOWN_AS_IS = {"\n", "\t"}


def visible(value: Any) -> Any:
    """``value`` with control and format characters (bidi overrides, isolates, zero-width
    marks) replaced by a visible ``⟨U+XXXX⟩``; non-strings unchanged."""
    if not isinstance(value, str):
        return "" if value is None else value
    if all(unicodedata.category(c)[0] != "C" or c in _SHOWN_AS_IS for c in value):
        return value
    return "".join(
        f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c)[0] == "C" and c not in _SHOWN_AS_IS else c
        for c in value
    )


def environment() -> Environment:
    return Environment(
        loader=PackageLoader("llm_bot.inspector", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=visible,
        auto_reload=False,
    )
