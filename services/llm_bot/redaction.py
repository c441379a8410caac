"""The one redaction of text the service did not write (a provider's error, a broker's, an
exception's message): what a log line may keep of it.

Such text can hold anything: a key the provider echoed, a user's words, a traceback with
the server's file paths. The bus and the dead-letter headers never carry it (an error's
own fixed text goes there, see ``llm_bot.errors``); a log keeps a bounded, redacted excerpt
with a digest of the whole, so an operator can tell errors apart and match them with the
provider's side without reading secrets:

- only plain words survive: runs of letters shorter than :data:`LONGEST_WORD`, or of at
  most :data:`LONGEST_NUMBER` digits (an HTTP status, a line number), each with at most
  one trailing punctuation mark; every other run (anything with a digit, a path, a
  URL, a key, an id, a control, zero-width or bidi character, a very long word) becomes
  ``[…]``;
- the excerpt stops at :data:`EXCERPT_CHARS`;
- ``(sha256:<12 hex>, <n> chars)`` of the original ends it.
"""

from __future__ import annotations

import hashlib

EXCERPT_CHARS = 160
"""The longest excerpt a log keeps (before the digest)."""
LONGEST_WORD = 20
"""A run of this many letters or more is redacted (a key made of letters only)."""
LONGEST_NUMBER = 4
"""A longer number is redacted (an account, a phone number, a key's digits)."""
MARK = "[…]"
_TRAILING = frozenset(".,:;!?")


def redacted(text: str, *, limit: int = EXCERPT_CHARS) -> str:
    """A bounded excerpt of ``text`` with anything but plain words replaced by ``[…]``,
    and the digest and length of the whole."""
    kept: list[str] = []
    size = 0
    for run in text.split():
        word = _plain(run)
        if word is None and kept and kept[-1] == MARK:
            continue
        piece = MARK if word is None else word
        if size + len(piece) + 1 > limit:
            if kept[-1:] != [MARK]:
                kept.append(MARK)
            break
        kept.append(piece)
        size += len(piece) + 1
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{' '.join(kept)} (sha256:{digest}, {len(text)} chars)".lstrip()


def _plain(run: str) -> str | None:
    """``run`` when it is a plain word or a short number (one trailing punctuation mark at
    most)."""
    core = run[:-1] if run[-1] in _TRAILING else run
    if 0 < len(core) < LONGEST_WORD and core.isalpha():
        return run
    if 0 < len(core) <= LONGEST_NUMBER and core.isascii() and core.isdigit():
        return run
    return None
