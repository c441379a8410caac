"""Recall: searches by outcome, timeouts by reason, durations, recalled items, and the
index's entries and embedding cost."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

RETRIEVAL_TIMEOUT_REASONS = ("embedding", "index_load", "search")
RETRIEVAL_OUTCOMES = ("searched", "filler_skip", "topic_reuse", "off", "failed", "timeout")


class RetrievalMetrics:
    """Recall: searches by outcome, timeouts by reason, durations, recalled items, and the
    index's entries and embedding cost."""

    def _add_retrieval_metrics(self, registry: CollectorRegistry) -> None:
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
        for outcome in RETRIEVAL_OUTCOMES:
            self.retrieval_searches.labels(outcome)
        for reason in RETRIEVAL_TIMEOUT_REASONS:
            self.retrieval_timeouts.labels(reason)
