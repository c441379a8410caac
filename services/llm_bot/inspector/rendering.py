"""Jinja2 templates from the package, autoescaped; every value shown goes through
``visible``: Unicode bidi and other control characters are shown as ``⟨U+202E⟩`` marks,
so text renders as text (it cannot reorder or hide what surrounds it)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape

from llm_bot.contract.identifiers import ID_PATTERN

_SHOWN_AS_IS = {"\n", "\t"}
_ID = re.compile(ID_PATTERN)


def visible(value: Any) -> Any:
    """``value`` with control and format characters (bidi overrides, isolates, zero-width
    marks) replaced by a visible ``⟨U+XXXX⟩``; non-strings unchanged. One look per
    distinct character (it runs on every value of every page)."""
    if not isinstance(value, str):
        return "" if value is None else value
    if value.isprintable():  # no character of a C category at all
        return value
    hidden = {
        ord(c): f"⟨U+{ord(c):04X}⟩"
        for c in set(value)
        if unicodedata.category(c)[0] == "C" and c not in _SHOWN_AS_IS
    }
    return value.translate(hidden) if hidden else value


def path_segment(value: Any) -> str:
    """An id as a URL path segment: as it is when it matches the id pattern (its characters
    are all allowed in a path segment), else percent-encoded. Cheaper than ``urlencode``
    for the thousands of links of a big user's page."""
    text = str(value)
    return text if _ID.fullmatch(text) else quote(text, safe="")


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("llm_bot.inspector", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=visible,
        auto_reload=False,
    )
    env.filters["path_segment"] = path_segment
    return env
