"""Ingress queues of another layout: found, unbound, and left to be drained.

When ``LLM_BOT_INGRESS_PARTITIONS`` changes (the single queue of an existing deployment
moved to partitions, or a count raised or lowered), the queues of the old layout may still
hold events. Nothing is deleted here: each such queue is unbound from what routed to it
(after the new layout is bound, so an event always has somewhere to go) and the service
consumes it until the operator deletes it once empty (docs/deployment.md, "Ingress
partitions").

The look uses a plain connection of its own: a queue that is not there closes the channel
it was asked on (a passive declare), which must not be one the service consumes on.
"""

from __future__ import annotations

import contextlib

import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import AMQPError, ChannelNotFoundEntity

from llm_bot.adapters.rabbit_connection import connect_first_node
from llm_bot.adapters.rabbit_topology import MAX_PARTITIONS, Topology, partition_name

log = structlog.get_logger(__name__)

LOOK_TIMEOUT_SECONDS = 5.0


def old_layout_candidates(topology: Topology) -> list[tuple[str, str, str]]:
    """The queues another layout may have left, each with the exchange and routing key that
    routed to it: (queue, exchange, routing key)."""
    hashed = [
        (partition_name(topology.ingress_queue, n), topology.partition_exchange, "1")
        for n in range(topology.ingress_partitions if topology.partitioned else 0, MAX_PARTITIONS)
    ]
    if not topology.partitioned:
        return hashed
    single = (topology.ingress_queue, topology.exchange, topology.ingress_routing_key)
    return [single, *hashed]


async def unbind_old_layout(amqp_url: str, topology: Topology) -> list[str]:
    """The queues of another layout that exist, each unbound now (idempotent: a binding
    already gone is no error). With one partition, the consistent-hash exchange, if there
    is one, is unbound from the ingress exchange first."""
    connection = await connect_first_node(amqp_url, attempt_timeout=LOOK_TIMEOUT_SECONDS)
    async with connection:
        if not topology.partitioned and not await _unbind_hashing(connection, topology):
            return []  # never partitioned: no partition queue to look for
        found = []
        for name, source, routing_key in old_layout_candidates(topology):
            if await _unbind_queue(connection, name, source, routing_key):
                found.append(name)
        return found


async def _unbind_hashing(connection: AbstractConnection, topology: Topology) -> bool:
    """Unbind the consistent-hash exchange from the ingress exchange; False when it does
    not exist."""
    channel = await connection.channel()
    try:
        hashing = await channel.get_exchange(topology.partition_exchange, ensure=True)
    except ChannelNotFoundEntity:
        return False
    try:
        await hashing.unbind(topology.exchange, routing_key=topology.ingress_routing_key)
        log.info("ingress.partitions_unbound", exchange=topology.partition_exchange)
    finally:
        await _close(channel)
    return True


async def _unbind_queue(
    connection: AbstractConnection, name: str, source: str, routing_key: str
) -> bool:
    """Unbind queue ``name`` from ``source``; False when the queue does not exist."""
    channel = await connection.channel()
    try:
        queue = await channel.declare_queue(name, passive=True)
    except ChannelNotFoundEntity:
        return False
    try:
        await queue.unbind(source, routing_key=routing_key)
    except AMQPError:  # its exchange is gone: nothing routes to it either
        log.info("ingress.old_queue_unrouted", queue=name, exchange=source)
    else:
        log.info("ingress.old_queue_unbound", queue=name, exchange=source)
    finally:
        await _close(channel)
    return True


async def _close(channel: AbstractChannel) -> None:
    with contextlib.suppress(Exception):
        await channel.close()
