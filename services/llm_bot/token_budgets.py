"""``LLM_BOT_TENANT_TOKEN_BUDGETS``: how many model tokens a tenant may spend per UTC day
and per UTC month (OWASP LLM10, unbounded consumption).

Format: ``tenant=LIMITS`` entries separated by commas, ``LIMITS`` one or both of
``<tokens>/day`` and ``<tokens>/month`` joined by ``+``::

    shop_1=2000000/day+40000000/month,shop_2=500000/day,*=100000/day

``*`` is the budget of every tenant not named; without it, a tenant not named has no
budget. Empty (the default): no budgets at all. Tokens are whole numbers (``_`` may group
digits: ``2_000_000``). A parse error is a ``ValueError`` that says what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

Period = Literal["day", "month"]
PERIODS: tuple[Period, ...] = ("day", "month")
DEFAULT_TENANT = "*"
OTHER_TENANTS_LABEL = "other"
"""The metric label of tenants that have the ``*`` budget (a tenant label per unnamed
tenant would grow without bound)."""

_TOKENS = re.compile(r"[0-9][0-9_]*")


def period_id(period: Period, at: datetime) -> str:
    """The UTC day ``YYYYMMDD`` or month ``YYYYMM`` that ``at`` falls in (naive: UTC)."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at
    return utc.strftime("%Y%m%d" if period == "day" else "%Y%m")


@dataclass(frozen=True)
class TokenBudget:
    """One tenant's limits; None: no limit for that period."""

    per_day: int | None = None
    per_month: int | None = None

    def limit(self, period: Period) -> int | None:
        return self.per_day if period == "day" else self.per_month


@dataclass(frozen=True)
class TenantTokenBudgets:
    """Every tenant's budget, as configured."""

    named: dict[str, TokenBudget] = field(default_factory=dict)
    default: TokenBudget | None = None
    """The ``*`` entry: the budget of tenants not named."""

    def __bool__(self) -> bool:
        return bool(self.named) or self.default is not None

    def of(self, tenant_id: str) -> TokenBudget | None:
        """The tenant's budget, or None when it has none."""
        return self.named.get(tenant_id, self.default)

    def metric_label(self, tenant_id: str) -> str:
        """The tenant's label on budget metrics: its id when it is named in the setting
        (a bounded set), else ``other``."""
        return tenant_id if tenant_id in self.named else OTHER_TENANTS_LABEL

    @classmethod
    def parse(cls, text: str) -> TenantTokenBudgets:
        named: dict[str, TokenBudget] = {}
        default: TokenBudget | None = None
        for entry in (part.strip() for part in text.split(",")):
            if not entry:
                continue
            tenant, sep, limits = entry.partition("=")
            tenant = tenant.strip()
            if not sep or not tenant:
                raise ValueError(f"{entry!r} is not tenant=<tokens>/day+<tokens>/month")
            if tenant in named or (tenant == DEFAULT_TENANT and default is not None):
                raise ValueError(f"tenant {tenant!r} is named twice")
            budget = _limits(tenant, limits)
            if tenant == DEFAULT_TENANT:
                default = budget
            else:
                named[tenant] = budget
        return cls(named=named, default=default)


def _limits(tenant: str, text: str) -> TokenBudget:
    found: dict[str, int] = {}
    for part in (p.strip() for p in text.split("+")):
        amount, slash, period = part.partition("/")
        period = period.strip().lower()
        amount = amount.strip()
        if not slash or period not in PERIODS:
            raise ValueError(
                f"budget of {tenant!r}: {part!r} is not <tokens>/day or <tokens>/month"
            )
        if not _TOKENS.fullmatch(amount) or int(amount) <= 0:
            raise ValueError(f"budget of {tenant!r}: {amount!r} is not a positive whole number")
        if period in found:
            raise ValueError(f"budget of {tenant!r}: /{period} is given twice")
        found[period] = int(amount)
    return TokenBudget(per_day=found.get("day"), per_month=found.get("month"))
