"""Prometheus metrics of tenants' token budgets (``LLM_BOT_TENANT_TOKEN_BUDGETS``).

The ``tenant`` label is a tenant named in the setting, or ``other`` for every tenant under
the ``*`` budget: its values are bounded by the configuration, never by traffic.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from llm_bot.token_budgets import OTHER_TENANTS_LABEL


class BudgetMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.tokens = Counter(
            "llmbot_tenant_tokens",
            "Model tokens (input + output, as the provider reported them) spent by a "
            "tenant's calls, the memory worker's included; tenants with a budget only.",
            ["tenant"],
            registry=registry,
        )
        self.used_ratio = Gauge(
            "llmbot_tenant_budget_used_ratio",
            "Share of the tenant's token budget spent in the current UTC period (day, "
            "month), as last read or written by this process; for tenant other, the "
            "highest among the tenants under the * budget.",
            ["tenant", "period"],
            registry=registry,
        )
        self.refusals = Counter(
            "llmbot_budget_refusals",
            "Requests refused because the tenant spent its token budget: model calls not "
            "made (an event answered budget_exceeded, a memory job deferred) or gateway "
            "requests answered 429 insufficient_quota.",
            ["tenant"],
            registry=registry,
        )
        self._highest: dict[tuple[str, str], tuple[str, float]] = {}

    def used(self, tenant: str, period: str, period_id: str, ratio: float) -> None:
        """``ratio`` of ``tenant``'s budget for ``period`` (``period_id``) is spent. For
        ``other`` the gauge keeps the highest ratio of the period (several tenants share
        the label), and starts again with the next period."""
        if tenant == OTHER_TENANTS_LABEL:
            seen_period, highest = self._highest.get((tenant, period), (period_id, 0.0))
            if seen_period == period_id:
                ratio = max(ratio, highest)
            self._highest[(tenant, period)] = (period_id, ratio)
        self.used_ratio.labels(tenant, period).set(ratio)
