"""The fake model's prompt cache, shaped like OpenAI's: a prompt whose start repeats the
previous prompt sent with the same ``prompt_cache_key`` (or without one) is served from
the cache when the repeated part is at least 1,024 tokens, in 128-token blocks. Tokens are
the fake's estimate (:func:`estimate_tokens`)."""

from __future__ import annotations

from collections import OrderedDict

from llm_bot.fake_model.responses import estimate_tokens

CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
CACHE_KEYS = 10_000
"""Keys remembered (least recently used forgotten first)."""


class PromptCache:
    """Remembers the last prompt per cache key and reports the cached share of the next."""

    def __init__(self) -> None:
        self._last: OrderedDict[str, str] = OrderedDict()

    def cached_tokens(self, key: str | None, prompt: str) -> int:
        """Tokens of ``prompt`` served from the cache; remembers ``prompt`` for ``key``."""
        bucket = key or ""
        previous = self._last.pop(bucket, "")
        self._last[bucket] = prompt
        while len(self._last) > CACHE_KEYS:
            self._last.popitem(last=False)
        same = 0
        for a, b in zip(previous, prompt, strict=False):
            if a != b:
                break
            same += 1
        tokens = estimate_tokens(prompt[:same]) if same else 0
        if tokens < CACHE_MIN_TOKENS:
            return 0
        return tokens // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS

    def clear(self) -> None:
        self._last.clear()
