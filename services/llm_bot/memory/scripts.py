"""Which script a text is written in, as far as memory needs to know: mostly Latin
letters, or mostly another script (Thai, Cyrillic, CJK...).

An embedding model made for English reads only the first kind (``adapters/local_embedder``);
and a conversation whose messages are of both kinds (an English question in a Thai
conversation) is where a message may be about what was said in the other script
(``Retriever.reach_across``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

FOREIGN_SHARE = 0.5
"""A text with at least this share of its letters outside the Latin script is not
mostly Latin."""


def mostly_latin(text: str) -> bool:
    """Whether ``text`` has something besides spaces and fewer than ``FOREIGN_SHARE`` of its
    letters outside the Latin script (a text without letters, numbers or emoji, counts as
    Latin: any model reads it as it is; "ฉันชอบ iPhone มาก" is more Thai than Latin)."""
    if text.isascii():  # most text, checked at C speed
        return bool(text.strip())
    if _LATIN.search(text) is None:  # no Latin letter: Latin only when it has no letter
        return bool(text.strip()) and _FOREIGN.search(text) is None
    letters = [c for c in text if c.isalpha()]
    foreign = sum(1 for c in letters if not _latin(c))
    return foreign < FOREIGN_SHARE * len(letters)


_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")
_FOREIGN = re.compile(r"[^\W\d_\u0000-\u024f\u1e00-\u1eff]")
"""A letter outside Basic Latin, Latin-1, Latin Extended-A/B and Latin Extended
Additional."""


def mixes_scripts(text: str, others: Iterable[str]) -> bool:
    """Whether one of ``others`` (with letters) is written in another script than ``text``."""
    latin = mostly_latin(text)
    return any(mostly_latin(other) != latin for other in others if any(map(str.isalpha, other)))


def _latin(letter: str) -> bool:
    """Basic Latin, Latin-1, Latin Extended-A/B and Latin Extended Additional."""
    code = ord(letter)
    return code < 0x0250 or 0x1E00 <= code <= 0x1EFF
