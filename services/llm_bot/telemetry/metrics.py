"""Prometheus metrics of llm-bot (prefix ``llmbot_``, base units, counters end in ``_total``,
no per-user or per-conversation labels), registered in a registry passed in.

Each area's instruments are defined in its own module (``delivery_metrics``,
``model_metrics``, ``memory_metrics``, ``retrieval_metrics``, ``fairness_metrics``);
``Metrics`` is all of them, one instance per process (or per test)."""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Gauge

from llm_bot import __version__
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.telemetry.delivery_metrics import DeliveryMetrics
from llm_bot.telemetry.fairness_metrics import FairDispatchMetrics
from llm_bot.telemetry.memory_metrics import MemoryMetrics
from llm_bot.telemetry.model_metrics import ModelMetrics
from llm_bot.telemetry.retrieval_metrics import RetrievalMetrics


class Metrics(DeliveryMetrics, ModelMetrics, MemoryMetrics, RetrievalMetrics, FairDispatchMetrics):
    """Every metric the service exports; one instance per process (or per test)."""

    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._add_delivery_metrics(registry)
        self._add_model_metrics(registry)
        self._add_memory_metrics(registry)
        self._add_retrieval_metrics(registry)
        self._add_fairness_metrics(registry)
        self.budgets = BudgetMetrics(registry=registry)
        self.build_info = Gauge(
            "llmbot_build_info",
            "Build information (value 1).",
            ["version", "python"],
            registry=registry,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
