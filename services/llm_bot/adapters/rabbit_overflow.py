"""Tenants' overflow queues: where a tenant's deliveries past its bound wait in the broker
(SPEC 4 "Bounded waiting"; issue 42; docs/architecture.md, "A flood larger than the window").

A replica holds at most ``LLM_BOT_MAX_WAITING`` deliveries of the partitions unacked (its
ingress window). A tenant's deliveries past its bound used to wait there too, so one tenant's
flood larger than the window filled it, and every other tenant's events waited in the
broker behind the flood. Now each moves: a copy is published, confirmed, to the tenant's
overflow queue, and only then the original is acked. The broker keeps it all along.

The overflow queues are quorum queues with a single active consumer, like the partitions,
and every replica consumes them with a window of its own; what they deliver is admitted as
its tenant has room. A conversation's order holds: the ids of its deliveries in an overflow
queue are noted in Redis beside its list, and while any are noted its later deliveries move
there too, behind them (``redis_fair_scripts._ADMIT``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractQueue

from llm_bot.adapters.held_message import MOVED_RECEIVED_AT, MOVED_ROUTING_KEY, HeldMessage
from llm_bot.adapters.rabbit_publisher import PUBLISH_TIMEOUT_SECONDS, copy_message
from llm_bot.adapters.rabbit_topology import Topology


async def declare_overflow(
    channel: AbstractChannel, topology: Topology
) -> tuple[AbstractQueue, ...]:
    """The overflow queues (``Topology.overflow_arguments``)."""
    arguments = topology.overflow_arguments()
    return tuple(
        [
            await channel.declare_queue(name, durable=True, arguments=arguments)
            for name in topology.overflow_queues()
        ]
    )


def overflow_copy(held: HeldMessage) -> aio_pika.Message:
    """The delivery as published (body, properties, headers), persistent, with the routing
    key it was published with and when it was first received in headers
    (:meth:`HeldMessage.of` restores both)."""
    headers = {
        **held.headers,
        MOVED_ROUTING_KEY: held.routing_key or "",
        MOVED_RECEIVED_AT: held.received_at,
    }
    message = copy_message(held, headers=headers)
    message.reply_to = held.reply_to  # an ask's reply address goes with it
    return message


async def move_to_overflow(
    channel: AbstractChannel, topology: Topology, moves: Sequence[tuple[str, HeldMessage]]
) -> list[bool]:
    """Publish each ``(tenant, delivery)`` to the tenant's overflow queue, in order (one
    channel keeps the order of its publishes); True for each the broker confirmed."""
    exchange = channel.default_exchange

    async def one(tenant: str, held: HeldMessage) -> bool:
        try:
            await exchange.publish(
                overflow_copy(held),
                topology.overflow_queue(tenant),
                mandatory=True,
                timeout=PUBLISH_TIMEOUT_SECONDS,
            )
        except Exception:  # noqa: BLE001  # returned, nacked, timed out, channel gone: kept
            return False
        return True

    return list(await asyncio.gather(*(one(tenant, held) for tenant, held in moves)))
