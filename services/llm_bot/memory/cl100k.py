"""The ``cl100k_base`` encoding from the vocabulary file shipped with llm-bot.

``memory/data/cl100k_base.tiktoken`` is OpenAI's public file, byte for byte; its SHA-256
is pinned here (the same digest tiktoken itself pins for it), checked before the file is
parsed, so a changed file fails loudly instead of counting tokens wrong. tiktoken's own
``cl100k_base`` would download the file on first use (and write a cache), which fails
offline and on a read-only root filesystem; no third-party plugin is involved.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import tiktoken

VOCABULARY_FILE: Final = "cl100k_base.tiktoken"
VOCABULARY_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
SPECIAL_TOKENS: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def vocabulary() -> bytes:
    """The shipped file, checked against :data:`VOCABULARY_SHA256` (ValueError if not)."""
    data = resources.files("llm_bot.memory").joinpath("data", VOCABULARY_FILE).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != VOCABULARY_SHA256:
        raise ValueError(f"{VOCABULARY_FILE} has SHA-256 {digest}, not the pinned one")
    return data


def cl100k_base() -> tiktoken.Encoding:
    import tiktoken  # noqa: PLC0415  # deferred: slow to import, and may be missing

    ranks = {}
    for line in vocabulary().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=PATTERN,
        mergeable_ranks=ranks,
        special_tokens=dict(SPECIAL_TOKENS),
    )
