"""Conversation memory: the window, compaction, long-term items, the memory model's output
and tool rounds and flows."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from llm_bot.telemetry.metric_buckets import WINDOW_BUCKETS


class MemoryMetrics:
    """Conversation memory: the window, compaction, long-term items, the memory model's
    output and tool rounds and flows."""

    def _add_memory_metrics(self, registry: CollectorRegistry) -> None:
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
        for reason in ("chars", "count"):
            self.trims.labels(reason)

    def window(self, *, sent: int, trimmed_by_chars: int, trimmed_by_count: int) -> None:
        self.window_messages.observe(sent)
        if trimmed_by_chars:
            self.trims.labels("chars").inc(trimmed_by_chars)
        if trimmed_by_count:
            self.trims.labels("count").inc(trimmed_by_count)
