"""``TenantTokenGuard``: checked before a tenant's model call, counted after, nobody
else's budget touched; calls outside any tenant's work are free."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.errors import BudgetExceeded, MemoryUnavailable
from llm_bot.service.token_spending import TenantTokenGuard, charged_tenant, charged_to
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.token_budgets import PERIODS, Period, TenantTokenBudgets, period_id

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class InMemoryTokenLedger:
    """The ``TokenLedger`` port in a dict (tenant, period id) -> tokens."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str], int] = {}
        self.failing = False

    async def add(self, tenant_id: str, tokens: int, at: datetime) -> dict[Period, int]:
        if self.failing:
            raise MemoryUnavailable("redis down")
        for period in PERIODS:
            key = (tenant_id, period_id(period, at))
            self.totals[key] = self.totals.get(key, 0) + tokens
        return await self.spent(tenant_id, at)

    async def spent(self, tenant_id: str, at: datetime) -> dict[Period, int]:
        return {p: self.totals.get((tenant_id, period_id(p, at)), 0) for p in PERIODS}


def guard(setting: str, ledger: InMemoryTokenLedger) -> tuple[TenantTokenGuard, CollectorRegistry]:
    registry = CollectorRegistry()
    return (
        TenantTokenGuard(
            budgets=TenantTokenBudgets.parse(setting),
            ledger=ledger,
            metrics=BudgetMetrics(registry=registry),
            clock=lambda: NOW,
        ),
        registry,
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_a_tenant_is_refused_once_its_day_is_spent_and_another_is_not() -> None:
    """Calls go on while under the cap (the last one may cross it), then are refused."""
    ledger = InMemoryTokenLedger()
    spending, registry = guard("shop_1=100/day,shop_2=100/day", ledger)
    with charged_to("shop_1"):
        await spending.before_call()
        await spending.after_call(60)
        await spending.before_call()  # 60 < 100: one more request may go
        await spending.after_call(60)  # 120: over the cap by less than one request
        with pytest.raises(BudgetExceeded) as refused:
            await spending.before_call()
    assert refused.value.code == "budget_exceeded"
    assert refused.value.period == "day"
    with charged_to("shop_2"):
        await spending.before_call()
    assert sample(registry, "llmbot_tenant_tokens_total", tenant="shop_1") == 120
    ratio = sample(registry, "llmbot_tenant_budget_used_ratio", tenant="shop_1", period="day")
    assert ratio == pytest.approx(1.2)
    assert sample(registry, "llmbot_budget_refusals_total", tenant="shop_1") == 1
    assert sample(registry, "llmbot_budget_refusals_total", tenant="shop_2") is None


async def test_the_month_limit_refuses_too() -> None:
    ledger = InMemoryTokenLedger()
    spending, _ = guard("*=1000000/day+50/month", ledger)
    with charged_to("anyone"):
        await spending.after_call(50)
        with pytest.raises(BudgetExceeded, match="month"):
            await spending.before_call()


async def test_tenants_without_a_budget_and_calls_outside_a_tenant_are_free() -> None:
    """No budget named and no ``*``: nothing read, nothing counted."""
    ledger = InMemoryTokenLedger()
    spending, _ = guard("shop_1=10/day", ledger)
    with charged_to("shop_9"):
        await spending.after_call(1000)
        await spending.before_call()
    await spending.after_call(1000)  # outside any tenant's work (a CLI)
    await spending.before_call()
    assert ledger.totals == {}


async def test_a_failed_count_never_fails_the_call_that_was_made() -> None:
    ledger = InMemoryTokenLedger()
    ledger.failing = True
    spending, _ = guard("shop_1=10/day", ledger)
    with charged_to("shop_1"):
        await spending.after_call(5)


async def test_the_charged_tenant_reaches_tasks_started_inside_and_ends_with_the_block() -> None:
    """Graph nodes run in tasks: they inherit the tenant; it does not leak afterwards."""
    with charged_to("shop_1"):
        seen = await asyncio.create_task(_tenant_in_task())
    assert seen == "shop_1"
    assert charged_tenant() is None
    assert await asyncio.create_task(_tenant_in_task()) is None


async def _tenant_in_task() -> str | None:
    return charged_tenant()


def test_other_keeps_the_highest_share_of_its_tenants_within_a_period() -> None:
    """Tenants under ``*`` share the label ``other``: its gauge is the highest share seen
    this period, and starts again with the next one; a named tenant's is its own."""
    registry = CollectorRegistry()
    metrics = BudgetMetrics(registry=registry)
    name = "llmbot_tenant_budget_used_ratio"
    metrics.used("other", "day", "20261125", 0.9)
    metrics.used("other", "day", "20261125", 0.1)
    assert sample(registry, name, tenant="other", period="day") == 0.9
    metrics.used("other", "day", "20261126", 0.1)
    assert sample(registry, name, tenant="other", period="day") == 0.1
    metrics.used("gold", "day", "20261125", 0.9)
    metrics.used("gold", "day", "20261125", 0.2)
    assert sample(registry, name, tenant="gold", period="day") == 0.2
