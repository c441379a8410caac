"""Model requests: durations by API and result, tokens, and the provider's rate limits."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from llm_bot.telemetry.metric_buckets import LATENCY_BUCKETS


class ModelMetrics:
    """Model requests: durations by API and result, tokens, and the provider's rate limits."""

    def _add_model_metrics(self, registry: CollectorRegistry) -> None:
        self.model_duration = Histogram(
            "llmbot_model_request_duration_seconds",
            "Model requests, by API and result.",
            ["api", "result"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.model_tokens = Counter(
            "llmbot_model_tokens",
            "Tokens reported by the provider, by type.",
            ["type"],
            registry=registry,
        )
        self.model_rate_limited = Counter(
            "llmbot_model_rate_limited",
            "Model calls the provider refused with 429, by source (chat, responses, embeddings).",
            ["source"],
            registry=registry,
        )
        self.model_paused_seconds = Counter(
            "llmbot_model_paused_seconds",
            "Seconds this process held every model call back because the provider asked "
            "it to wait (429 with Retry-After or reset headers).",
            registry=registry,
        )
        for kind in ("input", "output"):
            self.model_tokens.labels(kind)
        for source in ("chat", "responses", "embeddings"):
            self.model_rate_limited.labels(source)

    def model_request(
        self,
        *,
        api: str,
        ok: bool,
        seconds: float,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
    ) -> None:
        """One model request; ``cached_input_tokens`` are part of ``input_tokens`` (type
        ``cached_input`` counts them again, for the cache's hit share)."""
        self.model_duration.labels(api, "ok" if ok else "error").observe(seconds)
        if input_tokens:
            self.model_tokens.labels("input").inc(input_tokens)
        if output_tokens:
            self.model_tokens.labels("output").inc(output_tokens)
        if cached_input_tokens:
            self.model_tokens.labels("cached_input").inc(cached_input_tokens)
