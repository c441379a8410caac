"""``LLM_BOT_TENANT_TOKEN_BUDGETS``: its format, its errors, and the periods counters use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from llm_bot.config import ConfigurationError, load_settings
from llm_bot.token_budgets import TenantTokenBudgets, TokenBudget, period_id


def test_empty_means_no_budgets() -> None:
    """The default: nobody has a budget."""
    budgets = TenantTokenBudgets.parse("")
    assert not budgets
    assert budgets.of("shop_1") is None
    assert not TenantTokenBudgets.parse(" , ")


def test_named_tenants_have_their_limits_and_others_none_without_a_star() -> None:
    """Day and month joined by ``+``, either alone; a tenant not named has no budget."""
    budgets = TenantTokenBudgets.parse(
        "shop_1=2000000/day+40000000/month, shop_2=500_000/day,shop_3=9/MONTH"
    )
    assert budgets.of("shop_1") == TokenBudget(per_day=2_000_000, per_month=40_000_000)
    assert budgets.of("shop_2") == TokenBudget(per_day=500_000)
    assert budgets.of("shop_3") == TokenBudget(per_month=9)
    assert budgets.of("shop_4") is None
    assert budgets.of("shop_1").limit("month") == 40_000_000  # type: ignore[union-attr]


def test_star_is_the_budget_of_every_tenant_not_named() -> None:
    """``*`` applies to the rest; a named tenant keeps its own."""
    budgets = TenantTokenBudgets.parse("*=1000/day,gold=5000/day+90000/month")
    assert budgets.of("anyone") == TokenBudget(per_day=1000)
    assert budgets.of("gold") == TokenBudget(per_day=5000, per_month=90_000)


def test_metric_labels_are_named_tenants_or_other() -> None:
    """The tenant label never takes a value the configuration does not hold."""
    budgets = TenantTokenBudgets.parse("*=1000/day,gold=5000/day")
    assert budgets.metric_label("gold") == "gold"
    assert budgets.metric_label("someone_else") == "other"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("shop_1", "is not tenant="),
        ("=5/day", "is not tenant="),
        ("shop_1=5", "is not <tokens>/day or <tokens>/month"),
        ("shop_1=5/week", "is not <tokens>/day or <tokens>/month"),
        ("shop_1=five/day", "is not a positive whole number"),
        ("shop_1=0/day", "is not a positive whole number"),
        ("shop_1=-5/day", "is not a positive whole number"),
        ("shop_1=1.5/day", "is not a positive whole number"),
        ("shop_1=5/day+6/day", "/day is given twice"),
        ("shop_1=5/day,shop_1=6/month", "named twice"),
        ("*=5/day,*=6/day", "named twice"),
        ("shop_1=5/day+", "is not <tokens>/day or <tokens>/month"),
    ],
)
def test_a_bad_entry_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("+", r"\+").replace("*", r"\*")):
        TenantTokenBudgets.parse(text)


def test_a_bad_setting_is_a_configuration_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """Validated at start, one line, naming the variable and the entry."""
    monkeypatch.setenv("LLM_BOT_TENANT_TOKEN_BUDGETS", "shop_1=lots/day")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("invalid configuration: LLM_BOT_TENANT_TOKEN_BUDGETS:")
    assert "'lots' is not a positive whole number" in message
    assert "\n" not in message


def test_a_good_setting_is_parsed_by_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BOT_TENANT_TOKEN_BUDGETS", "shop_1=100/day,*=50/month")
    budgets = load_settings().token_budgets()
    assert budgets.of("shop_1") == TokenBudget(per_day=100)
    assert budgets.of("other_shop") == TokenBudget(per_month=50)


def test_periods_are_utc_days_and_months() -> None:
    """A time just after midnight in Bangkok is still the previous UTC day (and month)."""
    bangkok = timezone(timedelta(hours=7))
    at = datetime(2026, 12, 1, 3, 0, tzinfo=bangkok)
    assert period_id("day", at) == "20261130"
    assert period_id("month", at) == "202611"
    assert period_id("day", datetime(2026, 12, 1, 0, 0, tzinfo=UTC)) == "20261201"
