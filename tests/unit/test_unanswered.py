"""``UnansweredDeliveries`` (delivery/unanswered.py): the bound per tenant, held-back
deliveries let in oldest first and by chunks, acks once answered, closed channels
forgotten."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import CollectorRegistry

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.delivery.unanswered import Offered, UnansweredDeliveries
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.telemetry.metrics import Metrics


class _Delivery:
    class _Channel:
        is_closed = False

    def __init__(self) -> None:
        self.channel = self._Channel()
        self.acked = 0

    async def ack(self) -> None:
        self.acked += 1


def _offered(tenant: str, text: str) -> Offered:
    key = ConversationKey(tenant, "u", "c")
    return Offered(cast("Any", _Delivery()), HeldMessage(body=text.encode()), key)


def _ledger(bound: int) -> tuple[UnansweredDeliveries, Metrics]:
    metrics = Metrics(registry=CollectorRegistry())
    return UnansweredDeliveries(tenant_bound=bound, metrics=metrics), metrics


async def test_a_tenant_at_its_bound_is_held_back_and_let_in_oldest_first_by_chunks() -> None:
    ledger, _ = _ledger(16)  # chunk: 16 // 8 = 2
    for n in range(16):
        ledger.add(f"u{n}", _offered("a", f"m{n}"))
    assert ledger.at_bound("a")
    assert not ledger.at_bound("b")
    for n in range(16, 20):
        ledger.hold_back(_offered("a", f"m{n}"))
    assert ledger.at_bound("a", 0)  # held-back ones go first, even with room
    assert await ledger.answered("u0")
    assert ledger.released() == []  # room for one: less than a chunk
    assert await ledger.answered("u1")
    assert [o.held.body for o in ledger.released()] == [b"m16", b"m17"]
    assert not await ledger.answered("u1")  # acked once


async def test_answered_acks_the_delivery_and_report_counts_by_tenant() -> None:
    ledger, metrics = _ledger(4)
    one = _offered("a", "m0")
    ledger.add("u0", one)
    ledger.hold_back(_offered("b", "m1"))
    ledger.report()
    value = metrics.registry.get_sample_value
    assert value("llmbot_waiting_events", {"tenant": "a"}) == 1
    assert value("llmbot_waiting_events", {"tenant": "b"}) == 1
    assert value("llmbot_tenant_waiting_limit") == 4
    await ledger.answered("u0")
    assert cast("_Delivery", one.message).acked == 1
    ledger.give_back()
    ledger.report()
    assert value("llmbot_waiting_events", {"tenant": "a"}) is None


def test_deliveries_whose_channel_closed_are_forgotten_and_settling_ones_not_audited() -> None:
    ledger, _ = _ledger(4)
    closed, settling, waiting = (_offered("a", t) for t in ("m0", "m1", "m2"))
    cast("_Delivery", closed.message).channel.is_closed = True
    ledger.add("u0", closed)
    ledger.add("u1", settling)
    ledger.add("u2", waiting)
    ledger.settling("u1")
    assert ledger.by_conversation() == {waiting.key: ["u2"]}
    assert len(ledger) == 2
    assert ledger.still_unanswered(["u0", "u1", "u2"]) == [("u2", waiting)]
