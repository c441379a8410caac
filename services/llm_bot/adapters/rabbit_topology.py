"""RabbitMQ topology of llm-bot (SPEC sections 2 and 3), declared idempotently at start.

The ingress queue is a durable quorum queue that dead-letters to the DLX; the DLQ is bound
to the DLX with the ingress routing key, so both broker-side dead-lettering and the
service's own dead-letter publishes land there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue
from aiormq.abc import FieldTable

from llm_bot.config import BrokerConfig


@dataclass(frozen=True)
class Topology:
    """Names of exchanges, routing keys and queues (each overridable by env)."""

    exchange: str = "internal"
    ingress_routing_key: str = "internal.llmbot.v1"
    ingress_queue: str = "llm-bot.internal.llmbot.v1"
    candidate_routing_key: str = "internal.candidate.v1"
    error_routing_key: str = "internal.llmbot.error.v1"
    dlx: str = "internal.dlx"
    dlq: str = "llm-bot.internal.llmbot.v1.dlq"
    memory_routing_key: str = "internal.memory.v1"
    memory_queue: str = "llm-bot.memory.v1"
    memory_dlq: str = "llm-bot.memory.v1.dlq"
    delivery_limit: int = 20
    flow_result_routing_key: str = "internal.flow.result.v1"
    flow_result_queue: str = "llm-bot.flow.result.v1"
    flow_results: bool = False
    """Some persona runs a flow: declare ``flow_result_queue`` (bound to the results'
    routing key) so a result waits there for its reader."""
    events_routing_key: str = ""
    """Where events for the service go ("": ``ingress_routing_key``; the memory worker's
    view keeps the service's here, for the tool results it publishes on timeout)."""

    @classmethod
    def from_settings(cls, broker: BrokerConfig) -> Topology:
        return cls(
            exchange=broker.exchange,
            ingress_routing_key=broker.ingress_routing_key,
            ingress_queue=broker.ingress_queue,
            candidate_routing_key=broker.candidate_routing_key,
            error_routing_key=broker.error_routing_key,
            dlx=broker.dlx,
            dlq=broker.dlq,
            memory_routing_key=broker.memory_routing_key,
            memory_queue=broker.memory_queue,
            memory_dlq=broker.memory_dlq,
            delivery_limit=broker.delivery_limit,
            flow_result_routing_key=broker.flow_result_routing_key,
            flow_result_queue=broker.flow_result_queue,
        )

    def for_memory_worker(self) -> Topology:
        """The memory worker's view: its "ingress" is the memory-jobs queue, with its DLQ."""
        return replace(
            self,
            ingress_routing_key=self.memory_routing_key,
            ingress_queue=self.memory_queue,
            dlq=self.memory_dlq,
            events_routing_key=self.events_routing_key or self.ingress_routing_key,
        )

    def service_routing_key(self) -> str:
        """The routing key of the service's ingress (events)."""
        return self.events_routing_key or self.ingress_routing_key

    def queues(self) -> tuple[str, ...]:
        """Every queue this topology declares (for tear-down of demo and test deployments)."""
        results = (self.flow_result_queue,) if self.flow_results else ()
        return (self.ingress_queue, self.dlq, self.memory_queue, self.memory_dlq, *results)

    def memory_topology_is_separate(self) -> bool:
        return self.memory_queue != self.ingress_queue

    def ingress_arguments(self) -> FieldTable:
        """Quorum queue dead-lettering to the DLX. ``x-delivery-limit`` is the broker's
        backstop for a message that kills its consumer again and again (the service's own
        retries end far earlier, at ``LLM_BOT_MAX_ATTEMPTS``)."""
        return {
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": self.dlx,
            "x-dead-letter-routing-key": self.ingress_routing_key,
            "x-delivery-limit": self.delivery_limit,
        }


@dataclass(frozen=True)
class DeclaredTopology:
    exchange: AbstractExchange
    dlx: AbstractExchange
    ingress: AbstractQueue
    dlq: AbstractQueue


async def declare_topology(channel: AbstractChannel, topology: Topology) -> DeclaredTopology:
    """Declare exchanges, queues and bindings; safe to repeat."""
    exchange = await channel.declare_exchange(
        topology.exchange, aio_pika.ExchangeType.TOPIC, durable=True
    )
    dlx = await channel.declare_exchange(topology.dlx, aio_pika.ExchangeType.TOPIC, durable=True)
    dlq = await channel.declare_queue(
        topology.dlq, durable=True, arguments={"x-queue-type": "quorum"}
    )
    await dlq.bind(dlx, routing_key=topology.ingress_routing_key)
    ingress = await channel.declare_queue(
        topology.ingress_queue, durable=True, arguments=topology.ingress_arguments()
    )
    await ingress.bind(exchange, routing_key=topology.ingress_routing_key)
    if topology.memory_topology_is_separate():
        # Declared by the consumer too, so memory jobs wait for a worker instead of being
        # returned as unroutable.
        await declare_queue_with_dlq(channel, exchange, dlx, topology.for_memory_worker())
    if topology.flow_results:
        results = await channel.declare_queue(
            topology.flow_result_queue, durable=True, arguments={"x-queue-type": "quorum"}
        )
        await results.bind(exchange, routing_key=topology.flow_result_routing_key)
    return DeclaredTopology(exchange=exchange, dlx=dlx, ingress=ingress, dlq=dlq)


async def declare_queue_with_dlq(
    channel: AbstractChannel,
    exchange: AbstractExchange,
    dlx: AbstractExchange,
    topology: Topology,
) -> AbstractQueue:
    """A quorum queue bound to ``exchange`` and its DLQ bound to ``dlx``, by the same key."""
    dlq = await channel.declare_queue(
        topology.dlq, durable=True, arguments={"x-queue-type": "quorum"}
    )
    await dlq.bind(dlx, routing_key=topology.ingress_routing_key)
    queue = await channel.declare_queue(
        topology.ingress_queue, durable=True, arguments=topology.ingress_arguments()
    )
    await queue.bind(exchange, routing_key=topology.ingress_routing_key)
    return queue
