"""RabbitMQ topology of llm-bot (SPEC sections 2 and 3), declared idempotently at start.

The ingress is ``LLM_BOT_INGRESS_PARTITIONS`` durable quorum queues with a single active
consumer each (SPEC 4: a conversation's events in publish order, with any number of
replicas), dead-lettering to the DLX; the DLQ is bound to the DLX with the ingress routing
key, so both broker-side dead-lettering and the service's own dead-letter publishes land
there.

- One partition (the default): the ingress queue itself (``LLM_BOT_INGRESS_QUEUE``), bound
  to the exchange by the ingress routing key, as before; no plugin needed.
- N partitions: ``<queue>.p0`` … ``<queue>.p<N-1>``, bound with weight 1 to an
  ``x-consistent-hash`` exchange ``<queue>.partitions`` that hashes the AMQP
  ``correlation_id`` (the conversation id, SPEC 3), itself bound to the ingress exchange by
  the ingress routing key: publishers publish as before. Needs the
  ``rabbitmq_consistent_hash_exchange`` plugin.

Queues of another layout (the single queue after a move to partitions, partitions beyond
the count) are unbound and drained: ``rabbit_partitions.py``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue
from aiormq.abc import FieldTable
from aiormq.exceptions import ChannelPreconditionFailed

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
    ingress_partitions: int = 1
    single_active: bool = True
    """The ingress queues have a single active consumer (the service's: publish order);
    the memory worker's queue does not (its jobs are order-free, shared by workers)."""

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
            ingress_partitions=broker.ingress_partitions,
        )

    def for_memory_worker(self) -> Topology:
        """The memory worker's view: its "ingress" is the memory-jobs queue, with its DLQ."""
        return replace(
            self,
            ingress_routing_key=self.memory_routing_key,
            ingress_queue=self.memory_queue,
            dlq=self.memory_dlq,
            events_routing_key=self.events_routing_key or self.ingress_routing_key,
            ingress_partitions=1,
            single_active=False,
        )

    def service_routing_key(self) -> str:
        """The routing key of the service's ingress (events)."""
        return self.events_routing_key or self.ingress_routing_key

    @property
    def partitioned(self) -> bool:
        return self.ingress_partitions > 1

    def partition_queues(self) -> tuple[str, ...]:
        """The ingress queues, partition by partition (one: the ingress queue itself)."""
        if not self.partitioned:
            return (self.ingress_queue,)
        return tuple(partition_name(self.ingress_queue, n) for n in range(self.ingress_partitions))

    def overflow_queues(self) -> tuple[str, ...]:
        """The service's overflow queues (none for the memory worker): where a tenant's
        deliveries past its bound wait in the broker (``rabbit_overflow.py``)."""
        if not self.single_active:
            return ()
        return tuple(f"{self.ingress_queue}.overflow.{n}" for n in range(OVERFLOW_QUEUES))

    def overflow_arguments(self) -> FieldTable:
        """The partitions' arguments (dead-lettering, delivery limit, single active
        consumer), leaders spread over the nodes."""
        return {**self.ingress_arguments(), "x-queue-leader-locator": "balanced"}

    def overflow_queue(self, tenant_id: str) -> str:
        """The overflow queue of a tenant (tenants share the few there are, by hash)."""
        queues = self.overflow_queues()
        return queues[zlib.crc32(tenant_id.encode()) % len(queues)]

    @property
    def partition_exchange(self) -> str:
        """The consistent-hash exchange in front of the partitions."""
        return f"{self.ingress_queue}.partitions"

    def queues(self) -> tuple[str, ...]:
        """Every queue this topology declares (for tear-down of demo and test deployments)."""
        results = (self.flow_result_queue,) if self.flow_results else ()
        ingress = tuple(dict.fromkeys((self.ingress_queue, *self.partition_queues())))
        overflow = self.overflow_queues()
        return (*ingress, *overflow, self.dlq, self.memory_queue, self.memory_dlq, *results)

    def memory_topology_is_separate(self) -> bool:
        return self.memory_queue != self.ingress_queue

    def ingress_arguments(self) -> FieldTable:
        """Quorum queue dead-lettering to the DLX. ``x-delivery-limit`` is the broker's
        backstop for a message that kills its consumer again and again (the service's own
        retries end far earlier, at ``LLM_BOT_MAX_ATTEMPTS``)."""
        arguments: FieldTable = {
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": self.dlx,
            "x-dead-letter-routing-key": self.ingress_routing_key,
            "x-delivery-limit": self.delivery_limit,
        }
        if self.single_active:
            arguments["x-single-active-consumer"] = True
        return arguments


HASH_PROPERTY = "correlation_id"
"""What the partitions exchange hashes: the conversation id (SPEC 3: ``correlation_id`` =
``conversation_id`` on every event; one without it goes to one fixed partition)."""
OVERFLOW_QUEUES = 8
"""Overflow queues of the service: enough that tenants flooding at once rarely share one
(two that do drain at the pace of the slower)."""
MAX_PARTITIONS = 32
"""``LLM_BOT_INGRESS_PARTITIONS`` at most: the partitions looked for to drain."""


def partition_name(ingress_queue: str, number: int) -> str:
    return f"{ingress_queue}.p{number}"


@dataclass(frozen=True)
class DeclaredTopology:
    exchange: AbstractExchange
    dlx: AbstractExchange
    partitions: tuple[AbstractQueue, ...]
    """The ingress queues, partition by partition."""
    dlq: AbstractQueue
    unordered: tuple[str, ...] = ()
    """Ingress queues without the single active consumer they should have (declared by a
    version before partitions): publish order across replicas is not kept on them."""

    @property
    def ingress(self) -> AbstractQueue:
        """The first partition (the ingress queue itself with one partition)."""
        return self.partitions[0]


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
    partitions, unordered = await _declare_partitions(channel, exchange, topology)
    if topology.memory_topology_is_separate():
        # Declared by the consumer too, so memory jobs wait for a worker instead of being
        # returned as unroutable.
        await declare_queue_with_dlq(channel, exchange, dlx, topology.for_memory_worker())
    if topology.flow_results:
        results = await channel.declare_queue(
            topology.flow_result_queue, durable=True, arguments={"x-queue-type": "quorum"}
        )
        await results.bind(exchange, routing_key=topology.flow_result_routing_key)
    return DeclaredTopology(
        exchange=exchange, dlx=dlx, partitions=partitions, dlq=dlq, unordered=unordered
    )


async def _declare_partitions(
    channel: AbstractChannel, exchange: AbstractExchange, topology: Topology
) -> tuple[tuple[AbstractQueue, ...], tuple[str, ...]]:
    """The ingress queues and their bindings: straight to the exchange with one partition,
    through the consistent-hash exchange with more (the exchange-to-exchange binding is made
    last, once every partition can take what it routes). Also the names of those found
    without the single active consumer they should have."""
    if not topology.partitioned:
        queue, ordered = await _declare_single(channel, topology)
        await queue.bind(exchange, routing_key=topology.ingress_routing_key)
        return (queue,), (() if ordered or not topology.single_active else (queue.name,))
    # Leaders spread over the nodes (the default puts each on the declaring client's node).
    arguments = {**topology.ingress_arguments(), "x-queue-leader-locator": "balanced"}
    queues = [
        await channel.declare_queue(name, durable=True, arguments=arguments)
        for name in topology.partition_queues()
    ]
    hashing = await channel.declare_exchange(
        topology.partition_exchange,
        CONSISTENT_HASH,
        durable=True,
        arguments={"hash-property": HASH_PROPERTY},
    )
    for queue in queues:
        await queue.bind(hashing, routing_key="1")  # the weight: an equal share each
    await hashing.bind(exchange, routing_key=topology.ingress_routing_key)
    return tuple(queues), ()


CONSISTENT_HASH = "x-consistent-hash"


async def _declare_single(
    channel: AbstractChannel, topology: Topology
) -> tuple[AbstractQueue, bool]:
    """The one ingress queue, and whether it has its single active consumer. One that a
    version before partitions declared has none, and queue arguments cannot change: it is
    used as it is (order across replicas stays best effort; the consumer says so) until the
    deployment moves to partitions (docs/deployment.md)."""
    try:
        queue = await channel.declare_queue(
            topology.ingress_queue, durable=True, arguments=topology.ingress_arguments()
        )
    except ChannelPreconditionFailed:
        if not topology.single_active:
            raise
    else:
        return queue, topology.single_active
    await channel.reopen()  # the refusal closed it (a robust channel restores the rest)
    return await channel.declare_queue(topology.ingress_queue, passive=True), False


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
