"""Which provider an OpenAI-compatible base URL points at, for ``gen_ai.provider.name``
(OpenTelemetry GenAI conventions) and for what the provider accepts.

Well-known hosts map to the conventions' names (``openai``, ``azure.ai.openai``,
``groq``, ``mistral_ai``, ``deepseek``, ``x_ai``, ``perplexity``, ``gcp.gemini``) or to a
plain name where the conventions have none (``openrouter``, ``together``, ``fireworks``);
a local port 11434 is ``ollama``; anything else is named by its host, which is what an
operator looking at a trace needs (``vllm.internal``, ``127.0.0.1``).
``LLM_BOT_PROVIDER_NAME`` overrides it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

OPENAI = "openai"

_HOSTS = {
    "api.openai.com": OPENAI,
    "openrouter.ai": "openrouter",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.together.xyz": "together",
    "api.fireworks.ai": "fireworks",
}
_SUFFIXES = {".openai.azure.com": "azure.ai.openai"}
OLLAMA_PORT = 11434


def provider_name(base_url: str | None) -> str:
    """The provider behind ``base_url`` (None: the SDK's default, OpenAI)."""
    if not base_url:
        return OPENAI
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if host in _HOSTS:
        return _HOSTS[host]
    for suffix, name in _SUFFIXES.items():
        if host.endswith(suffix):
            return name
    if parts.port == OLLAMA_PORT:
        return "ollama"
    return host or OPENAI


def takes_prompt_cache_key(provider: str) -> bool:
    """Whether the provider documents ``prompt_cache_key`` (others may reject unknown
    request fields, so it is sent only where it is known to be accepted)."""
    return provider == OPENAI
