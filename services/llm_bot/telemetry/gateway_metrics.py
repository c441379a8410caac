"""Prometheus metrics of ``llm-bot gateway`` (prefix ``llmbot_gateway_``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
STREAM_ENDINGS = ("completed", "failed", "timeout", "contradicted", "disconnected")


class GatewayMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "llmbot_gateway_requests",
            "Chat completion requests, by HTTP status and whether they streamed.",
            ["status", "stream"],
            registry=registry,
        )
        self.time_to_first_token = Histogram(
            "llmbot_gateway_time_to_first_token_seconds",
            "From a streaming request's arrival to its first text sent to the client.",
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.duration = Histogram(
            "llmbot_gateway_request_duration_seconds",
            "From a request's arrival to its last byte (the stream's end), by stream.",
            ["stream"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.stream_endings = Counter(
            "llmbot_gateway_stream_endings",
            "How streams that started ended: completed, failed (the event failed), timeout, "
            "contradicted (a retried model call answered differently after part of the "
            "first was sent), disconnected (the client left; the turn still completes).",
            ["ending"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "llmbot_gateway_requests_in_flight",
            "Requests waiting for or streaming their reply.",
            registry=registry,
        )
        self.connections_refused = Counter(
            "llmbot_gateway_connections_refused",
            "Connections closed at once, by reason: per_address (their client address held "
            "LLM_BOT_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS connections).",
            ["reason"],
            registry=registry,
        )
        self.connections_refused.labels("per_address")
        for ending in STREAM_ENDINGS:
            self.stream_endings.labels(ending)
