"""A delivery stored in the fair queue reads back unchanged (adapters/held_message.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, cast

from aio_pika import DeliveryMode
from hypothesis import given
from hypothesis import strategies as st

from llm_bot.adapters.held_message import HeldMessage, decode_held, encode_held
from llm_bot.adapters.rabbit_overflow import overflow_copy
from llm_bot.adapters.rabbit_topology import Topology

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**62), max_value=2**62)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    body=st.binary(max_size=200),
    headers=st.dictionaries(st.text(min_size=1, max_size=12), _VALUES, max_size=5),
    reply_to=st.none() | st.text(max_size=30),
)
def test_body_headers_and_properties_round_trip(
    body: bytes, headers: dict[str, object], reply_to: str | None
) -> None:
    """Any body (newlines included), header values JSON cannot hold, and the properties."""
    held = HeldMessage(
        body=body,
        headers=headers,
        content_type="application/json",
        message_id="evt_1",
        correlation_id="c1",
        routing_key="internal.llmbot.v1",
        reply_to=reply_to,
        received_at=1_700_000_000.5,
    )
    uid, back = decode_held(encode_held("a" * 32, held))
    assert uid == "a" * 32
    assert back == held


def test_timestamps_and_decimals_come_back_as_their_types() -> None:
    """A timestamp property and header, and a decimal header, keep their types."""
    stamp = datetime(2025, 7, 30, 10, 30, tzinfo=UTC)
    held = HeldMessage(body=b"{}", headers={"at": stamp, "price": Decimal("2.50")}, timestamp=stamp)
    _, back = decode_held(encode_held("b" * 32, held))
    assert back.timestamp == stamp
    assert back.headers == {"at": stamp, "price": Decimal("2.50")}


def test_published_at_is_the_timestamp_else_the_arrival() -> None:
    """Dwell time starts at the publisher's timestamp when it has a sane one."""
    stamp = datetime(2025, 7, 30, 10, 30, tzinfo=UTC)
    arrived = stamp.timestamp() + 2
    assert HeldMessage(body=b"", timestamp=stamp, received_at=arrived).published_at() == (
        stamp.timestamp()
    )
    assert HeldMessage(body=b"", received_at=arrived).published_at() == arrived
    future = datetime(2030, 1, 1, tzinfo=UTC)  # a clock ahead of ours: not trusted
    assert HeldMessage(body=b"", timestamp=future, received_at=arrived).published_at() == arrived


def test_a_copy_moved_to_an_overflow_queue_comes_back_as_it_was_published() -> None:
    """The overflow copy keeps body, properties and headers; delivered from the overflow
    queue (default exchange, routing key = the queue), it reads back with the routing key
    it was published with and when it was first received."""
    held = HeldMessage(
        body=b'{"id": "e1"}',
        headers={"traceparent": "00-abc-def-01", "x-delivery-count": 2},
        content_type="application/json",
        message_id="m1",
        correlation_id="c1",
        timestamp=datetime(2026, 1, 2, tzinfo=UTC),
        routing_key="internal.llmbot.v1",
        reply_to="amq.rabbitmq.reply-to.x",
        received_at=1_000.0,
    )
    copy = overflow_copy(held)
    delivered = SimpleNamespace(
        body=copy.body,
        headers=copy.headers,
        content_type=copy.content_type,
        content_encoding=copy.content_encoding,
        message_id=copy.message_id,
        correlation_id=copy.correlation_id,
        timestamp=copy.timestamp,
        type=copy.type,
        app_id=copy.app_id,
        routing_key="llm-bot.internal.llmbot.v1.overflow.3",
        reply_to=copy.reply_to,
        redelivered=False,
    )
    back = HeldMessage.of(cast("Any", delivered), received_at=2_000.0)
    assert back == held
    assert copy.delivery_mode == DeliveryMode.PERSISTENT


def test_overflow_queues_are_named_after_the_ingress_and_shared_by_tenant_hash() -> None:
    topology = Topology(ingress_queue="q")
    names = topology.overflow_queues()
    assert names == tuple(f"q.overflow.{n}" for n in range(len(names)))
    assert {topology.overflow_queue(f"tenant{n}") for n in range(200)} == set(names)
    assert topology.overflow_queue("t1") == topology.overflow_queue("t1")
    assert set(names) <= set(topology.queues())  # torn down with the rest
    assert topology.for_memory_worker().overflow_queues() == ()
