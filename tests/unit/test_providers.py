"""``gen_ai.provider.name`` from the base URL, and the fake model's prompt cache."""

from __future__ import annotations

import pytest

from llm_bot.adapters.providers import provider_name, takes_prompt_cache_key
from llm_bot.fake_model.prompt_cache import PromptCache


@pytest.mark.parametrize(
    ("base_url", "name"),
    [
        (None, "openai"),
        ("", "openai"),
        ("https://api.openai.com/v1", "openai"),
        ("https://my-resource.openai.azure.com/openai/v1", "azure.ai.openai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("http://localhost:11434/v1", "ollama"),
        ("http://vllm.internal:8000/v1", "vllm.internal"),
        ("http://127.0.0.1:9999/v1", "127.0.0.1"),
    ],
)
def test_the_provider_is_named_by_its_host(base_url: str | None, name: str) -> None:
    assert provider_name(base_url) == name


def test_only_openai_is_sent_the_cache_key_by_default() -> None:
    assert takes_prompt_cache_key("openai")
    assert not takes_prompt_cache_key("ollama")
    assert not takes_prompt_cache_key("openrouter")


def test_the_fake_cache_serves_repeated_prefixes_of_1024_tokens_in_blocks() -> None:
    cache = PromptCache()
    long = "x" * 8000  # 2,000 estimated tokens
    assert cache.cached_tokens("k", long + "first") == 0  # nothing before
    assert cache.cached_tokens("k", long + "second") == 1920  # 2,000 down to 128s
    assert cache.cached_tokens("other", long + "third") == 0  # another key
    assert cache.cached_tokens("k", "y" + long) == 0  # differs from the start
    assert cache.cached_tokens("k", "y" + "x" * 3000) == 0  # under 1,024 tokens
