"""Token counting for the context budget (SPEC 5.3) and compaction triggers (SPEC 5.4).

:class:`TiktokenCounter` counts with ``cl100k_base`` built from the vocabulary file shipped
with llm-bot, its hash pinned (``cl100k.py``); tiktoken's own ``cl100k_base`` would
download it on first use, which fails offline, so it is never asked for.
:class:`CharEstimateCounter` is the fallback when the encoding cannot be loaded (tiktoken
missing, or the file not the pinned one): one token per four characters, rounded up.

Message counts follow the OpenAI cookbook estimate: 4 tokens of overhead per message
(``<|start|>{role/name}\\n{content}<|end|>\\n``), the tokens of every field, one token less
when a ``name`` replaces the role, and 2 tokens priming the reply.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import structlog

from llm_bot.errors import log_fields
from llm_bot.memory.cl100k import cl100k_base

if TYPE_CHECKING:
    import tiktoken

log = structlog.get_logger(__name__)

MESSAGE_OVERHEAD_TOKENS: Final = 4
NAME_ADJUSTMENT_TOKENS: Final = -1
REPLY_PRIMING_TOKENS: Final = 2
CHARS_PER_TOKEN: Final = 4


class TokenCounter(Protocol):
    """Counts tokens of text and of a chat prompt."""

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of a chat prompt: every field, per-message overhead, reply priming."""
        ...


def _field_text(value: Any) -> str:
    """A message field as counted text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def count_chat_tokens(count: Callable[[str], int], messages: Sequence[Mapping[str, Any]]) -> int:
    """The cookbook estimate of a chat prompt's tokens, with ``count`` for each field."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        for key, value in message.items():
            if value is None:
                continue
            total += count(_field_text(value))
            if key == "name":
                total += NAME_ADJUSTMENT_TOKENS
    return total


@functools.cache
def load_encoding() -> tiktoken.Encoding:
    """The shipped ``cl100k_base`` encoding, loaded once; never touches the network.

    Raises ImportError when tiktoken is missing and ValueError when the vocabulary file is
    not the pinned one.
    """
    return cl100k_base()


class TiktokenCounter:
    """Exact counts with the offline ``cl100k_base`` encoding."""

    def __init__(self, encoding: tiktoken.Encoding | None = None) -> None:
        self._encoding = encoding if encoding is not None else load_encoding()

    @property
    def encoding_name(self) -> str:
        return self._encoding.name

    def count(self, text: str) -> int:
        # encode_ordinary: special-token text in user content ("<|endoftext|>") is counted
        # as ordinary text instead of raising.
        return len(self._encoding.encode_ordinary(text))

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return count_chat_tokens(self.count, messages)


class CharEstimateCounter:
    """The fallback estimate: ``ceil(characters / 4)`` tokens."""

    def count(self, text: str) -> int:
        return -(-len(text) // CHARS_PER_TOKEN)

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return count_chat_tokens(self.count, messages)


@functools.cache
def _encoding_or_none() -> tiktoken.Encoding | None:
    """The encoding, or None (warned about once) when it cannot be loaded."""
    try:
        return load_encoding()
    except (ImportError, ValueError, OSError) as exc:
        log.warning(
            "tokens.fallback_estimate",
            encoding="cl100k_base",
            **log_fields(exc),
        )
        return None


def default_token_counter() -> TokenCounter:
    """A :class:`TiktokenCounter` when the encoding loads, else the char estimate."""
    encoding = _encoding_or_none()
    if encoding is None:
        return CharEstimateCounter()
    return TiktokenCounter(encoding)


__all__ = [
    "CharEstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_chat_tokens",
    "default_token_counter",
    "load_encoding",
]
