"""Stored text made safe to quote in a prompt (SPEC 5.3, OWASP LLM01).

Recalled messages, facts and summaries are the users' own words. Before any of it is
quoted into the memory message (:mod:`llm_bot.memory.memory_message`), :func:`sanitize`
turns it into one plain line:

1. invisible characters go: format characters (Unicode category Cf: zero-width spaces and
   joiners U+200B..U+200D, bidi marks and controls U+200E/U+200F, U+202A..U+202E,
   U+2066..U+2069, the byte-order mark U+FEFF, tag characters U+E0000..U+E007F, the soft
   hyphen), control characters (Cc; whitespace controls become spaces first) and lone
   surrogates (Cs, which no UTF-8 request could carry);
2. NFKC normalisation, so full-width and other compatibility forms (a full-width
   ``[MEMORY:``, ``<`` or backtick) become the plain characters they look like, which the
   quoting then escapes;
3. Thai and Lao SARA AM, which NFKC splits into NIKHAHIT + SARA AA, are joined again, so
   Thai text is written as it was (Thai combining marks are category Mn and are kept);
4. whitespace runs, newlines included, collapse to one space and the ends are trimmed.

NFKC never produces a Cf, Cc or Cs character, so the result is stable:
``sanitize(sanitize(text)) == sanitize(text)``. The trade-off of step 1: zero-width joiners
inside emoji sequences and non-joiners in Persian or Indic words are dropped too (the
emoji show as their parts; the words read the same).
"""

from __future__ import annotations

import unicodedata
from typing import Final

_INVISIBLE_CATEGORIES: Final = frozenset({"Cf", "Cc", "Cs"})
_SARA_AM: Final = (("\u0e4d\u0e32", "\u0e33"), ("\u0ecd\u0eb2", "\u0eb3"))
"""(what NFKC makes of SARA AM, SARA AM): Thai, then Lao."""


def is_invisible(char: str) -> bool:
    """Whether ``char`` is a format, control or surrogate code point (whitespace aside)."""
    return not char.isspace() and unicodedata.category(char) in _INVISIBLE_CATEGORIES


def sanitize(text: str) -> str:
    """``text`` as one visible, NFKC-normalised line (see the module docstring)."""
    visible = "".join(" " if char.isspace() else char for char in text if not is_invisible(char))
    normal = unicodedata.normalize("NFKC", visible)
    for split, joined in _SARA_AM:
        normal = normal.replace(split, joined)
    return " ".join(normal.split())


__all__ = ["is_invisible", "sanitize"]
