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
3. except Thai and Lao SARA AM, which NFKC would split into NIKHAHIT + SARA AA: the text
   between them is normalised and they are kept as written, so Thai text stays as it was
   (a NIKHAHIT + SARA AA written as two stays two; Thai combining marks are category Mn
   and are kept);
4. whitespace runs, newlines included, collapse to one space and the ends are trimmed.

NFKC never produces a Cf, Cc or Cs character, so the result is stable:
``sanitize(sanitize(text)) == sanitize(text)``. The trade-off of step 1: zero-width joiners
inside emoji sequences and non-joiners in Persian or Indic words are dropped too (the
emoji show as their parts; the words read the same).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Final

_INVISIBLE_CATEGORIES: Final = frozenset({"Cf", "Cc", "Cs"})
_SARA_AM: Final = re.compile("([\u0e33\u0eb3])")
"""Thai and Lao SARA AM, which NFKC would split into NIKHAHIT + SARA AA: the text between
them is normalised, they are kept as written (and a NIKHAHIT + SARA AA written so stays)."""


_WHITESPACE = re.compile(r"\s")
"""What ``str.isspace`` calls whitespace: each becomes a space first."""


def is_invisible(char: str) -> bool:
    """Whether ``char`` is a format, control or surrogate code point (whitespace aside)."""
    return not char.isspace() and unicodedata.category(char) in _INVISIBLE_CATEGORIES


def strip_invisible(text: str) -> str:
    """``text`` without its invisible characters (step 1 above: format, control and
    surrogate code points), everything else as written: line breaks, spacing, scripts and
    compatibility forms stay. What an imported transcript's turns keep (SPEC 3
    ``transcript``): they are history an integrator hands over, and a bidi override in them
    would reorder what the model and an operator read."""
    invisible = {ord(char): None for char in set(text) if is_invisible(char)}
    return text.translate(invisible) if invisible else text


_ASCII_INVISIBLE: Final = {code: None for code in range(128) if is_invisible(chr(code))}
"""The ASCII control characters that are not whitespace."""


def sanitize(text: str) -> str:
    """``text`` as one visible, NFKC-normalised line (see the module docstring). Done in C
    but for one look at each distinct character: it runs on every recalled line of every
    prompt (an ASCII text, most of them, needs no look: its invisible characters are
    known, and NFKC leaves it as it is)."""
    if text.isascii():
        return " ".join(text.translate(_ASCII_INVISIBLE).split())
    spaced = _WHITESPACE.sub(" ", text)
    invisible = {ord(char): None for char in set(spaced) if is_invisible(char)}
    visible = spaced.translate(invisible) if invisible else spaced
    if visible.isascii():  # NFKC leaves ASCII as it is
        return " ".join(visible.split())
    parts = _SARA_AM.split(visible)  # SARA AM at the odd places
    normal = "".join(
        part if odd else unicodedata.normalize("NFKC", part)
        for part, odd in zip(parts, itertools.cycle((False, True)), strict=False)
    )
    return " ".join(normal.split())


__all__ = ["is_invisible", "sanitize", "strip_invisible"]
