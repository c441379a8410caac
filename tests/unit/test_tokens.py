"""Token counting: the offline tiktoken encoding, the chars/4 fallback, message overhead."""

from __future__ import annotations

import hashlib
import math
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from structlog.testing import capture_logs

from llm_bot.memory import cl100k, tokens
from llm_bot.memory.tokens import (
    CharEstimateCounter,
    TiktokenCounter,
    TokenCounter,
    count_chat_tokens,
    default_token_counter,
    load_encoding,
)


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """Forget the cached encoding before and after the test."""
    tokens.load_encoding.cache_clear()
    tokens._encoding_or_none.cache_clear()
    yield
    tokens.load_encoding.cache_clear()
    tokens._encoding_or_none.cache_clear()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection or fetch a URL fails the test."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    original_read_file = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"tiktoken tried to fetch {blobpath}")
        return original_read_file(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", local_only)


def test_offline_encoding_loads_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_caches: None, no_network: None
) -> None:
    """With an empty tiktoken cache and no network, the shipped cl100k_base loads and counts
    (and writes nothing to the cache: a read-only root filesystem is fine)."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    counter = TiktokenCounter()
    assert counter.encoding_name == "cl100k_base"
    assert counter.count("hello world") == 2
    assert list(tmp_path.iterdir()) == []


def test_tiktoken_counts_like_cl100k_base() -> None:
    """Known cl100k_base counts: English words and an empty string."""
    counter = TiktokenCounter()
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("The quick brown fox jumps over the lazy dog.") == 10


def test_tiktoken_counts_thai_text() -> None:
    """Thai text (no spaces, multi-byte) gets a positive count, more tokens than words."""
    counter = TiktokenCounter()
    thai = "ราคาสินค้านี้เท่าไหร่ครับ"
    count = counter.count(thai)
    assert 5 < count <= len(thai.encode())
    assert counter.count(thai + thai) > count


def test_tiktoken_counts_special_token_text_as_ordinary_text() -> None:
    """User text that spells a special token is counted, not rejected."""
    assert TiktokenCounter().count("<|endoftext|>") > 1


def test_encoding_is_loaded_once(fresh_caches: None) -> None:
    """The loader is cached: every counter shares one encoding object."""
    assert load_encoding() is load_encoding()
    assert TiktokenCounter()._encoding is TiktokenCounter()._encoding


def test_count_messages_adds_the_cookbook_overhead() -> None:
    """Each message costs 4 plus its fields; the reply priming adds 2."""
    counter = TiktokenCounter()
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "hello world"},
    ]
    fields = sum(counter.count(m["role"]) + counter.count(m["content"]) for m in messages)
    assert counter.count_messages(messages) == fields + 2 * 4 + 2
    assert counter.count_messages([]) == 2


def test_count_messages_name_and_non_text_fields() -> None:
    """A name costs its tokens minus one; None is skipped; other values count as JSON."""
    estimate = CharEstimateCounter()
    named = [{"role": "user", "name": "somchai", "content": None}]
    assert estimate.count_messages(named) == 2 + 4 + 1 + 2 - 1  # "user" 1, "somchai" 2
    with_tools = [{"role": "assistant", "tool_calls": [{"id": "a"}]}]
    tool_json = '[{"id":"a"}]'  # compact JSON, 12 characters
    assert estimate.count_messages(with_tools) == 2 + 4 + 3 + math.ceil(len(tool_json) / 4)


@pytest.mark.parametrize("text", ["", "a", "abcd", "abcde", "ราคาสินค้านี้เท่าไหร่ครับ", "x" * 401])
def test_char_estimate_is_ceil_of_chars_over_four(text: str) -> None:
    """The fallback estimate is ceil(characters / 4)."""
    assert CharEstimateCounter().count(text) == math.ceil(len(text) / 4)


def test_count_chat_tokens_uses_the_given_counter() -> None:
    """The shared message estimate works with any per-text count function."""
    assert count_chat_tokens(lambda _text: 10, [{"role": "user", "content": "x"}]) == 2 + 4 + 20


def test_default_counter_is_tiktoken_here(fresh_caches: None) -> None:
    """With the shipped vocabulary, the default counter is the exact one."""
    counter: TokenCounter = default_token_counter()
    assert isinstance(counter, TiktokenCounter)
    assert counter.count("hello world") == 2


def test_default_counter_falls_back_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    """A vocabulary file that is not the pinned one is refused: the default is the
    estimate, and the warning is logged once."""
    monkeypatch.setattr(cl100k, "VOCABULARY_SHA256", "0" * 64)
    with capture_logs() as logs:
        first = default_token_counter()
        second = default_token_counter()
    assert isinstance(first, CharEstimateCounter)
    assert isinstance(second, CharEstimateCounter)
    warnings = [entry for entry in logs if entry["event"] == "tokens.fallback_estimate"]
    assert len(warnings) == 1
    assert warnings[0]["log_level"] == "warning"
    assert warnings[0]["error_type"] == "ValueError"


def test_counters_satisfy_the_protocol() -> None:
    """Both counters are usable wherever a TokenCounter is expected."""
    counters: list[TokenCounter] = [TiktokenCounter(), CharEstimateCounter()]
    for counter in counters:
        assert counter.count("abc") >= 1
        assert counter.count_messages([{"role": "user", "content": "abc"}]) >= 7


def test_the_shipped_vocabulary_is_the_pinned_file() -> None:
    """OpenAI's public cl100k_base.tiktoken, whose SHA-256 tiktoken itself pins too."""
    data = cl100k.vocabulary()
    assert hashlib.sha256(data).hexdigest() == cl100k.VOCABULARY_SHA256
    assert len(data.splitlines()) == 100256
