"""Prometheus metrics of llm-bot (prefix ``llmbot_``, base units, counters end in ``_total``,
no per-user or per-conversation labels), registered in a registry passed in."""

from __future__ import annotations

import platform
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from llm_bot import __version__
from llm_bot.telemetry.budget_metrics import BudgetMetrics

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
WINDOW_BUCKETS = (0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 64)
OUTCOMES = ("ok", "skip", "duplicate", "retried", "dead_lettered", "refused", "let_go")
ERROR_CODES = ("invalid_event", "model_error", "memory_unavailable", "timeout", "internal")


RETRIEVAL_TIMEOUT_REASONS = ("embedding", "index_load", "search")
RETRIEVAL_OUTCOMES = ("searched", "filler_skip", "topic_reuse", "off", "failed", "timeout")


class Metrics:
    """Every metric the service exports; one instance per process (or per test)."""

    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.registry = registry
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
        self.window_messages = Histogram(
            "llmbot_memory_window_messages",
            "Messages of the recent-message window sent to the model.",
            buckets=WINDOW_BUCKETS,
            registry=registry,
        )
        self.trims = Counter(
            "llmbot_memory_trims",
            "Messages evicted from the window by the reducer, by the bound that evicted them.",
            ["reason"],
            registry=registry,
        )
        self.compactions = Counter(
            "llmbot_memory_compactions",
            "Compaction runs of the memory worker, by result.",
            ["result"],
            registry=registry,
        )
        self.ltm_writes = Counter(
            "llmbot_ltm_writes",
            "Long-term memory items written, by kind.",
            ["kind"],
            registry=registry,
        )
        self.tool_rounds = Counter(
            "llmbot_tool_rounds",
            "Rounds of tool calls, by what happened: opened (a tool_call candidate), "
            "completed (every result came), closed (a new user message closed open calls), "
            "timed_out (the worker closed calls whose results did not come in time).",
            ["result"],
            registry=registry,
        )
        self.flow_results = Counter(
            "llmbot_flow_results",
            "Flows that ended, by status: completed, exited (the user stopped), expired "
            "(no reply within LLM_BOT_FLOW_TTL_SECONDS).",
            ["status"],
            registry=registry,
        )
        self.ltm_evictions = Counter(
            "llmbot_ltm_evictions",
            "Long-term items removed by the retention sweep (age or count), by kind.",
            ["kind"],
            registry=registry,
        )
        self.ltm_facts = Counter(
            "llmbot_ltm_facts",
            "Facts the summarizer returned, by what they did to long-term memory: added (new), "
            "updated (superseded a stored fact), merged (restated one), unchanged (a rerun).",
            ["outcome"],
            registry=registry,
        )
        self.memory_model_junk = Counter(
            "llmbot_memory_model_junk",
            "Memory-worker model replies rejected as invalid (not JSON or not the schema), by "
            "task (summarizer, classifier).",
            ["task"],
            registry=registry,
        )
        self.classifier_fallbacks = Counter(
            "llmbot_classifier_fallbacks",
            "Messages classified by the keyword fallback, by reason (the model's error code or "
            "invalid_model_output).",
            ["reason"],
            registry=registry,
        )
        self.retrieval_searches = Counter(
            "llmbot_retrieval_searches",
            "Retrievals on the reply path, by outcome (searched, filler_skip, topic_reuse, off, "
            "failed).",
            ["outcome"],
            registry=registry,
        )
        self.retrieval_timeouts = Counter(
            "llmbot_retrieval_timeouts",
            "Searches past their time budget (the reply went on without recall), by what they "
            "waited for: embedding (the query's), index_load (the user's index into this "
            "process), search.",
            ["reason"],
            registry=registry,
        )
        self.retrieval_copy_behind = Counter(
            "llmbot_retrieval_copy_behind",
            "Searches of this process's copy of a user's index whose refresh did not come "
            "back within LLM_BOT_RETRIEVAL_TIMEOUT_MS: the copy was searched as it stood "
            "(lacking what was indexed since its last refresh) while the refresh went on.",
            registry=registry,
        )
        self.retrieval_duration = Histogram(
            "llmbot_retrieval_duration_seconds",
            "Time retrieval added to the reply path (query embedding and index search), by "
            "outcome.",
            ["outcome"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
            registry=registry,
        )
        self.recalled_items = Histogram(
            "llmbot_retrieval_recalled_items",
            "Recalled items in each prompt (after the budget).",
            buckets=(0, 1, 2, 5, 10, 20, 40, 80),
            registry=registry,
        )
        self.index_entries = Counter(
            "llmbot_index_entries",
            "Entries the memory worker embedded and wrote to the retrieval index, by kind.",
            ["kind"],
            registry=registry,
        )
        self.index_embed_cpu = Histogram(
            "llmbot_index_embedding_cpu_seconds",
            "CPU seconds the memory worker spent embedding, per indexed entry (one "
            "observation per batch).",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
            registry=registry,
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
        self.sweep_backlog = Gauge(
            "llmbot_sweep_backlog",
            "What a sweep of the memory worker left due when it ended (its time budget), by "
            "sweep (idle: conversations to finalize; retention: users to apply retention to).",
            ["sweep"],
            registry=registry,
        )
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
        self.ingress_queues = Gauge(
            "llmbot_ingress_queues",
            "Ingress queues this replica consumes, by role: partition (single active "
            "consumer: publish order), unordered (a queue of a version before partitions, "
            "without it), draining (of another layout, unbound: consumed until deleted).",
            ["role"],
            registry=registry,
        )
        self.budgets = BudgetMetrics(registry=registry)
        self.build_info = Gauge(
            "llmbot_build_info",
            "Build information (value 1).",
            ["version", "python"],
            registry=registry,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        for outcome in OUTCOMES:  # present from the start, so rate() works from zero
            self.events.labels(outcome)
        for code in ERROR_CODES:
            self.dead_letters.labels(code)
        for reason in ("chars", "count"):
            self.trims.labels(reason)
        for outcome in RETRIEVAL_OUTCOMES:
            self.retrieval_searches.labels(outcome)
        for reason in RETRIEVAL_TIMEOUT_REASONS:
            self.retrieval_timeouts.labels(reason)
        for kind in ("input", "output"):
            self.model_tokens.labels(kind)
        for reason in ("conversation_busy", "tenant_over_share", "no_slot"):
            self.fair_waited.labels(reason)
        for source in ("chat", "responses", "embeddings"):
            self.model_rate_limited.labels(source)
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

    def window(self, *, sent: int, trimmed_by_chars: int, trimmed_by_count: int) -> None:
        self.window_messages.observe(sent)
        if trimmed_by_chars:
            self.trims.labels("chars").inc(trimmed_by_chars)
        if trimmed_by_count:
            self.trims.labels("count").inc(trimmed_by_count)
