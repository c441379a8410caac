"""Tenants' token budgets (``LLM_BOT_TENANT_TOKEN_BUDGETS``), checked before and counted
after every model call a tenant causes.

The tenant a call is charged to is the one whose work is running: the event handler and
the memory worker wrap each event or job in :func:`charged_to`, and the model adapter asks
:class:`TenantTokenGuard` around each call (``ModelSpending``), whatever the code between
them (graph nodes, tool rounds, flows, classification, summaries). A call made outside any
tenant's work (a CLI, a benchmark) is neither checked nor counted.

Before a call the tenant's day and month totals are read: a total at or over its limit
refuses the call with ``BudgetExceeded``. After the call its usage (input + output tokens,
as the provider reported them) is added. So a tenant stops within one request of its cap
(a call that starts under the cap may end over it; calls of the tenant running at the same
moment may each do so), and no other tenant is affected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime

import structlog

from llm_bot.errors import BudgetExceeded, LlmBotError, log_fields
from llm_bot.ports import TokenLedger
from llm_bot.telemetry.budget_metrics import BudgetMetrics
from llm_bot.token_budgets import PERIODS, Period, TenantTokenBudgets, TokenBudget, period_id

log = structlog.get_logger(__name__)

_charged_tenant: ContextVar[str | None] = ContextVar("llmbot_charged_tenant", default=None)


@contextlib.contextmanager
def charged_to(tenant_id: str) -> Iterator[None]:
    """Model calls made inside the block (tasks started in it included) are the tenant's."""
    token = _charged_tenant.set(tenant_id)
    try:
        yield
    finally:
        _charged_tenant.reset(token)


def charged_tenant() -> str | None:
    return _charged_tenant.get()


class TenantTokenGuard:
    """Checks and counts tenants' token budgets (the ``ModelSpending`` port)."""

    def __init__(
        self,
        *,
        budgets: TenantTokenBudgets,
        ledger: TokenLedger,
        metrics: BudgetMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._budgets = budgets
        self._ledger = ledger
        self._metrics = metrics
        self._clock = clock

    async def check(self, tenant_id: str) -> None:
        """Raise ``BudgetExceeded`` when the tenant spent its day's or month's budget;
        ``MemoryUnavailable`` when the totals cannot be read."""
        budget = self._budgets.of(tenant_id)
        if budget is None:
            return
        at = self._clock()
        totals = await self._ledger.spent(tenant_id, at)
        self._report(tenant_id, budget, totals, at)
        for period in PERIODS:
            limit = budget.limit(period)
            if limit is not None and totals[period] >= limit:
                self._metrics.refusals.labels(self._budgets.metric_label(tenant_id)).inc()
                log.info("budget.exceeded", tenant_id=tenant_id, period=period, limit=limit)
                raise BudgetExceeded(tenant_id, period)

    async def add(self, tenant_id: str, tokens: int) -> None:
        """Count a call's tokens against the tenant's budget (tenants with one only)."""
        budget = self._budgets.of(tenant_id)
        if budget is None or tokens <= 0:
            return
        at = self._clock()
        totals = await self._ledger.add(tenant_id, tokens, at)
        self._metrics.tokens.labels(self._budgets.metric_label(tenant_id)).inc(tokens)
        self._report(tenant_id, budget, totals, at)

    async def before_call(self) -> None:
        tenant_id = charged_tenant()
        if tenant_id is not None:
            await self.check(tenant_id)

    async def after_call(self, tokens: int) -> None:
        tenant_id = charged_tenant()
        if tenant_id is None:
            return
        try:
            await self.add(tenant_id, tokens)
        except LlmBotError as exc:  # the reply was paid for: never lose it for a counter
            log.warning(
                "budget.count_failed", tenant_id=tenant_id, tokens=tokens, **log_fields(exc)
            )

    def _report(
        self, tenant_id: str, budget: TokenBudget, totals: dict[Period, int], at: datetime
    ) -> None:
        label = self._budgets.metric_label(tenant_id)
        for period in PERIODS:
            limit = budget.limit(period)
            if limit is not None:
                self._metrics.used(label, period, period_id(period, at), totals[period] / limit)
