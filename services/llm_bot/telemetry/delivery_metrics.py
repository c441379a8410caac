"""Events consumed and answered, their outcomes and durations, dead letters and the sweeps'
backlog."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from llm_bot.telemetry.metric_buckets import LATENCY_BUCKETS

OUTCOMES = ("ok", "skip", "duplicate", "retried", "dead_lettered", "refused", "let_go")
ERROR_CODES = ("invalid_event", "model_error", "memory_unavailable", "timeout", "internal")


class DeliveryMetrics:
    """Events consumed and answered, their outcomes and durations, dead letters and the
    sweeps' backlog."""

    def _add_delivery_metrics(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            "llmbot_events",
            "Events handled, by outcome (retried counts each retry).",
            ["outcome"],
            registry=registry,
        )
        self.event_duration = Histogram(
            "llmbot_event_duration_seconds",
            "Time from delivery to ack, by final outcome.",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "llmbot_events_in_flight", "Deliveries being processed now.", registry=registry
        )
        self.replies_sent = Counter(
            "llmbot_replies_sent",
            "Messages to events' reply_to addresses (streamed replies), by schema "
            "(candidate.delta.v1, candidate.v1, llmbot.error.v1) and result (sent, failed).",
            ["schema", "result"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "llmbot_dead_letters",
            "Events dead-lettered, by error code.",
            ["code"],
            registry=registry,
        )
        self.last_processed = Gauge(
            "llmbot_last_processed_timestamp_seconds",
            "Unix time of the last event acked.",
            registry=registry,
        )
        self.sweep_backlog = Gauge(
            "llmbot_sweep_backlog",
            "What a sweep of the memory worker left due when it ended (its time budget), by "
            "sweep (idle: conversations to finalize; retention: users to apply retention to).",
            ["sweep"],
            registry=registry,
        )
        for outcome in OUTCOMES:  # present from the start, so rate() works from zero
            self.events.labels(outcome)
        for code in ERROR_CODES:
            self.dead_letters.labels(code)
        for sweep in ("idle", "retention"):
            self.sweep_backlog.labels(sweep)

    def event_done(self, outcome: str, seconds: float, *, code: str | None = None) -> None:
        self.events.labels(outcome).inc()
        self.event_duration.labels(outcome).observe(seconds)
        self.last_processed.set(time.time())
        if code is not None:
            self.dead_letters.labels(code).inc()

    def retried(self) -> None:
        self.events.labels("retried").inc()
