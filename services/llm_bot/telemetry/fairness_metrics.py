"""Fair dispatch: dwell and waits, conversations held back and ready, waiting events and
their bound, repairs, and the ingress queues."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from llm_bot.telemetry.metric_buckets import LATENCY_BUCKETS


class FairDispatchMetrics:
    """Fair dispatch: dwell and waits, conversations held back and ready, waiting events
    and their bound, repairs, and the ingress queues."""

    def _add_fairness_metrics(self, registry: CollectorRegistry) -> None:
        self.fair_dwell = Histogram(
            "llmbot_dwell_seconds",
            "Time from an event's publish (its timestamp property, else its arrival) to the "
            "start of its processing.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.fair_waited = Counter(
            "llmbot_events_waited",
            "Events that waited in the fair queue instead of starting at once, by reason "
            "(conversation_busy, tenant_over_share, no_slot).",
            ["reason"],
            registry=registry,
        )
        self.fair_held_back = Gauge(
            "llmbot_tenants_held_back",
            "Tenants with waiting work held at their share on this replica (last dispatch).",
            registry=registry,
        )
        self.fair_ready = Gauge(
            "llmbot_fair_queue_ready_conversations",
            "Conversations with events waiting for a free slot, over every replica (each "
            "replica reports the same figure): with llmbot_events_in_flight, the demand to "
            "scale on.",
            registry=registry,
        )
        self.waiting_events = Gauge(
            "llmbot_waiting_events",
            "Events of a tenant this replica took from RabbitMQ and has not answered yet "
            "(admitted to the fair queue, or held back at the tenant's bound); each stays "
            "unacked in RabbitMQ until answered.",
            ["tenant"],
            registry=registry,
        )
        self.waiting_bound = Gauge(
            "llmbot_tenant_waiting_limit",
            "LLM_BOT_TENANT_MAX_WAITING: a tenant's waiting events on one replica at most.",
            registry=registry,
        )
        self.fair_orphans = Counter(
            "llmbot_fair_queue_orphans_repaired",
            "Conversations found with waiting events but nothing to hand them over (no "
            "holder, not ready, not watched), made ready again.",
            registry=registry,
        )
        self.fair_readmitted = Counter(
            "llmbot_fair_queue_readmitted",
            "Waiting events Redis lost (restart without persistence, failover, eviction), "
            "admitted again from the delivery RabbitMQ still held.",
            registry=registry,
        )
        self.fair_overflowed = Counter(
            "llmbot_fair_queue_overflowed",
            "Deliveries of a tenant past its bound copied to its overflow queue, by result: "
            "moved (the broker confirmed the copy; the original is acked) or refused (kept "
            "unacked in the replica, its copy published again a second later).",
            ["result"],
            registry=registry,
        )
        self.ingress_queues = Gauge(
            "llmbot_ingress_queues",
            "Ingress queues this replica consumes, by role: partition (single active "
            "consumer: publish order), unordered (a queue of a version before partitions, "
            "without it), draining (of another layout, unbound: consumed until deleted).",
            ["role"],
            registry=registry,
        )
        for reason in ("conversation_busy", "tenant_over_share", "no_slot"):
            self.fair_waited.labels(reason)
