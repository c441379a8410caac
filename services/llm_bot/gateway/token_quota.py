"""The gateway's check of a tenant's token budget (``LLM_BOT_TENANT_TOKEN_BUDGETS``):
a tenant that spent its budget for the day or the month is answered 429
``insufficient_quota`` (OpenAI's code for a spent quota) before anything is published.

The service checks again before each model call (an event that passed here while another
request spent the rest is answered ``budget_exceeded``, the same 429 here). When Redis
cannot be read the request goes on: the service's own check decides.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from llm_bot.errors import BudgetExceeded, LlmBotError, log_fields
from llm_bot.gateway.openai_wire import insufficient_quota

log = structlog.get_logger(__name__)


class BudgetGuard(Protocol):
    """Checks a tenant's token budget (``service/token_spending.py``'s ``TenantTokenGuard``,
    wired by the gateway's entry point)."""

    async def check(self, tenant_id: str) -> None:
        """Raise ``BudgetExceeded`` when the tenant's budget is spent."""
        ...


class TokenQuota:
    def __init__(self, *, guard: BudgetGuard) -> None:
        self._guard = guard

    async def check(self, tenant_id: str) -> None:
        """Raise the 429 ``WireError`` when the tenant's budget is spent."""
        try:
            await self._guard.check(tenant_id)
        except BudgetExceeded as exc:
            raise insufficient_quota() from exc
        except LlmBotError as exc:  # Redis down: the service's check before the call decides
            log.warning("gateway.budget_unchecked", **log_fields(exc))
