"""Ingress past one queue leader: one ingress queue against N partitions, same run, on a
3-node RabbitMQ cluster of the bench's own (free ports, the consistent-hash exchange
plugin enabled; the machine's broker is not touched).

Run by hand (not part of `make test`, not collected by pytest):

    .venv/bin/python -m tests.bench.partitions [--messages 20000] [--partitions 3 6] [--rounds 2]

Each layout is declared by the service's own code (``declare_topology`` with
``LLM_BOT_INGRESS_PARTITIONS`` = 1 or N: the ingress queue with a single active consumer,
or N such quorum queues behind the ``x-consistent-hash`` exchange on ``correlation_id``,
leaders placed ``balanced`` over the nodes). Then, at once:

- publishers: one connection per node, each publishing its share of ``--messages``
  persistent 600-byte bodies to the ingress exchange with the ingress routing key (as
  integrators do), over 5,000 conversations (``correlation_id``), with publisher confirms,
  ``--window`` unconfirmed at most per publisher;
- consumers: one connection per node (three replicas), each consuming every partition
  (prefetch 256 per partition) and acking each delivery, as the service's admission does
  before it hands the event on.

Figures: messages/s = messages / (first publish → last ack), and each layout's ratio to the
single queue of the same round; the three nodes' CPU (user + system of their Erlang VMs,
from ``/proc``) per message, steadier than the rate on a shared machine. Layouts alternate within a round; ``--rounds`` repeats.
The nodes share this machine's cores, so the figure is what one machine's three nodes do,
not three servers'.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from dataclasses import replace
from pathlib import Path

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from tests.support.rabbit_cluster import RabbitClusterNodes, rabbit_cluster

CONVERSATIONS = 5000
BODY = b"x" * 600


def nodes_cpu_seconds(cluster: RabbitClusterNodes) -> float:
    """User + system CPU of the nodes' Erlang VMs so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for node in cluster.nodes:
        pid = (node.directory / "node.pid").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def one_layout(
    cluster: RabbitClusterNodes, partitions: int, messages: int, window: int
) -> tuple[float, float]:
    """Messages/s through ``partitions`` ingress queues (1: the single queue), and the
    nodes' CPU milliseconds per message."""
    suffix = uuid.uuid4().hex[:8]
    topology = replace(
        Topology(),
        ingress_routing_key=f"bench.partitions.{suffix}",
        ingress_queue=f"bench.partitions.{suffix}",
        dlq=f"bench.partitions.{suffix}.dlq",
        memory_queue=f"bench.partitions.{suffix}",  # no separate memory queue
        ingress_partitions=partitions,
    )
    urls = [node.url for node in cluster.nodes]
    messages -= messages % len(urls)  # an equal share per publisher
    admin = await aio_pika.connect(urls[0])
    try:
        await declare_topology(await admin.channel(), topology)
        done = asyncio.Event()
        acked = 0

        async def on_message(message: AbstractIncomingMessage) -> None:
            nonlocal acked
            await message.ack()
            acked += 1
            if acked >= messages:
                done.set()

        consumers = [await aio_pika.connect(url) for url in urls]
        for connection in consumers:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=256)
            for name in topology.partition_queues():
                queue = await channel.get_queue(name, ensure=False)
                await queue.consume(on_message)
        publishers = [await aio_pika.connect(url) for url in urls]
        share = messages // len(publishers)
        started, cpu = time.perf_counter(), nodes_cpu_seconds(cluster)
        await asyncio.gather(
            *(
                _publish(connection, topology, range(n * share, (n + 1) * share), window)
                for n, connection in enumerate(publishers)
            )
        )
        await asyncio.wait_for(done.wait(), 600)
        elapsed = time.perf_counter() - started
        cpu = nodes_cpu_seconds(cluster) - cpu
        for connection in [*publishers, *consumers]:
            await connection.close()
        channel = await admin.channel()
        for name in (*topology.partition_queues(), topology.dlq):
            await channel.queue_delete(name)
        if topology.partitioned:
            await channel.exchange_delete(topology.partition_exchange)
        return messages / elapsed, 1000 * cpu / messages
    finally:
        await admin.close()


async def _publish(
    connection: aio_pika.abc.AbstractConnection, topology: Topology, numbers: range, window: int
) -> None:
    channel = await connection.channel(publisher_confirms=True)
    exchange = await channel.get_exchange(topology.exchange)
    pending: set[asyncio.Future[object]] = set()
    for n in numbers:
        message = aio_pika.Message(
            BODY,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            correlation_id=f"c{n % CONVERSATIONS}",
            message_id=f"m{n}",
        )
        pending.add(
            asyncio.ensure_future(
                exchange.publish(message, routing_key=topology.ingress_routing_key)
            )
        )
        if len(pending) >= window:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(*pending)


async def main(args: argparse.Namespace) -> None:
    layouts = [1, *args.partitions]
    rates: dict[int, list[float]] = {layout: [] for layout in layouts}
    costs: dict[int, list[float]] = {layout: [] for layout in layouts}
    with rabbit_cluster() as cluster:
        print(f"3-node cluster on ports {[node.port for node in cluster.nodes]}")
        for round_number in range(args.rounds):
            for layout in layouts:
                rate, cost = await one_layout(cluster, layout, args.messages, args.window)
                rates[layout].append(rate)
                costs[layout].append(cost)
                print(
                    f"round {round_number + 1}: {layout:2d} partition(s): {rate:8.0f} msg/s, "
                    f"nodes' CPU {cost:.2f} ms/message"
                )
    base = statistics.median(rates[1])
    print(
        f"\n== ingress: {args.messages} messages, 3 publishers, 3 consumers, {args.rounds} rounds"
    )
    for layout in layouts:
        median = statistics.median(rates[layout])
        print(
            f"{layout:2d} partition(s): median {median:8.0f} msg/s "
            f"(x{median / base:.2f} the single queue), nodes' CPU "
            f"{statistics.median(costs[layout]):.2f} ms/message"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--window", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
