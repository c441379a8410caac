"""How a replica subscribes to the ingress's queues (the partitions and the overflow
queues): each a single active consumer queue, every replica subscribed to each with a
consumer priority of its own."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue
from aiormq.abc import FieldTable

OnMessage = Callable[[AbstractIncomingMessage], Awaitable[None]]


async def subscribe(
    queues: Sequence[AbstractQueue], on_message: OnMessage, *, replica: str | None
) -> dict[str, tuple[AbstractQueue, str]]:
    """Consume each queue (acks by hand); with a ``replica`` id, with its priority on the
    queue (the memory worker's consumers are equals: no single active one, no priority).
    Returns name -> (queue, consumer tag)."""
    consuming: dict[str, tuple[AbstractQueue, str]] = {}
    for queue in queues:
        arguments: FieldTable = {}
        if replica is not None:
            arguments["x-priority"] = partition_priority(replica, queue.name)
        tag = await queue.consume(on_message, no_ack=False, arguments=arguments)
        consuming[queue.name] = (queue, tag)
    return consuming


def partition_priority(replica: str, queue: str) -> int:
    """This replica's consumer priority on a partition: rendezvous hashing, so each
    partition prefers one replica and the partitions spread evenly over the replicas
    whatever their number. RabbitMQ 4.x makes the highest-priority consumer of a single
    active consumer queue the active one (the current one fades: it gets nothing more and
    hands over once what it holds is acked, so order holds); 3.x ignores it (the first
    consumer is active)."""
    digest = hashlib.sha256(f"{replica}/{queue}".encode()).digest()
    return int.from_bytes(digest[:2], "big") % 1000
