"""Tenant shares on one replica: who takes the next slot (service/fairness.py)."""

from __future__ import annotations

import pytest

from llm_bot.config import ConfigurationError, load_settings, parse_tenant_weights
from llm_bot.service.fairness import TenantShares


def test_a_tenant_under_its_share_goes_before_one_over_it() -> None:
    """With one tenant holding its whole share, the next slot goes to the other."""
    shares = TenantShares(slots=8, max_in_flight=2)
    shares.start("flood")
    shares.start("flood")
    assert not shares.under_share("flood")
    assert shares.next_tenant({"flood", "quiet"}) == "quiet"
    assert shares.held_back({"flood", "quiet"}) == {"flood"}


def test_past_its_share_a_tenant_waits_while_another_tenant_is_running() -> None:
    """Work-conserving only when alone: with another tenant's event in flight, a tenant at
    its share takes no more slots, though slots are free."""
    shares = TenantShares(slots=8, max_in_flight=2)
    shares.start("flood")
    shares.start("flood")
    shares.start("quiet")
    assert shares.next_tenant({"flood"}) is None
    assert shares.held_back({"flood"}) == {"flood"}
    shares.finish("quiet")
    assert shares.next_tenant({"flood"}) == "flood"


def test_work_conserving_a_tenant_alone_takes_every_slot() -> None:
    """Past its share, a tenant still gets free slots while nobody else waits."""
    shares = TenantShares(slots=4, max_in_flight=1)
    for _ in range(4):
        assert shares.next_tenant({"flood"}) == "flood"
        shares.start("flood")
    assert shares.free == 0
    assert shares.next_tenant({"flood", "quiet"}) is None


def test_least_work_in_flight_per_weight_goes_first() -> None:
    """A tenant of weight 2 holding 2 ranks with one of weight 1 holding 1; ties go to the
    tenant served longest ago."""
    shares = TenantShares(slots=16, max_in_flight=4, weights={"gold": 2.0})
    shares.start("gold")
    shares.start("gold")
    shares.start("basic")
    assert shares.share("gold") == 8
    assert shares.share("basic") == 4
    assert shares.next_tenant({"gold", "basic"}) == "gold"  # equal load: gold served first
    shares.start("gold")
    assert shares.next_tenant({"gold", "basic"}) == "basic"


def test_slots_are_shared_in_proportion_to_weight_under_contention() -> None:
    """Two tenants always waiting, filled slot by slot: the weighted one ends with twice
    the slots."""
    shares = TenantShares(slots=12, max_in_flight=12, weights={"gold": 2.0})
    while (tenant := shares.next_tenant({"gold", "basic"})) is not None:
        shares.start(tenant)
    assert shares.running == {"gold": 8, "basic": 4}


def test_finish_gives_the_slot_back() -> None:
    """A finished event frees its slot and its tenant's count."""
    shares = TenantShares(slots=1, max_in_flight=1)
    shares.start("a")
    assert shares.next_tenant({"b"}) is None
    shares.finish("a")
    assert shares.running == {}
    assert shares.next_tenant({"b"}) == "b"


def test_share_is_at_least_one_slot_and_at_most_all() -> None:
    """A tiny weight still gets a slot; a huge one no more than the replica has."""
    shares = TenantShares(slots=8, max_in_flight=2, weights={"tiny": 0.01, "huge": 100.0})
    assert shares.share("tiny") == 1
    assert shares.share("huge") == 8


def test_weights_parse_from_tenant_equals_weight_pairs() -> None:
    """``LLM_BOT_TENANT_WEIGHTS``: comma-separated ``tenant=weight``; blanks are ignored."""
    assert parse_tenant_weights("gold=2, trial=0.5,") == {"gold": 2.0, "trial": 0.5}
    assert parse_tenant_weights("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gold", "is not tenant=weight"),
        ("gold=x", "is not a number"),
        ("gold=0", "must be a positive number"),
        ("gold=inf", "must be a positive number"),
        ("gold=1,gold=2", "named twice"),
    ],
)
def test_bad_weights_are_refused_at_start_naming_the_variable(text: str, message: str) -> None:
    """A bad ``LLM_BOT_TENANT_WEIGHTS`` stops the process with the variable and the fault."""
    with pytest.raises(ConfigurationError, match=f"LLM_BOT_TENANT_WEIGHTS: .*{message}"):
        load_settings(tenant_weights=text)


def test_default_share_is_a_quarter_of_the_prefetch() -> None:
    """Unset, a tenant's share is prefetch / 4 (at least 1); set, it is the setting."""
    assert load_settings(prefetch=32).fairness.tenant_share == 8
    assert load_settings(prefetch=2).fairness.tenant_share == 1
    assert load_settings(prefetch=32, tenant_max_in_flight=3).fairness.tenant_share == 3
