"""The ingress layout by partition count: names, arguments, and what another layout left."""

from __future__ import annotations

from dataclasses import replace

from llm_bot.adapters.rabbit_partitions import old_layout_candidates
from llm_bot.adapters.rabbit_topology import MAX_PARTITIONS, Topology


def test_one_partition_is_the_ingress_queue_itself_with_a_single_active_consumer() -> None:
    """The default keeps the contract's queue name and adds the single active consumer."""
    topology = Topology()
    assert topology.partition_queues() == ("llm-bot.internal.llmbot.v1",)
    assert topology.ingress_arguments()["x-single-active-consumer"] is True
    assert not topology.partitioned


def test_partitions_are_numbered_after_the_ingress_queue() -> None:
    """N partitions: <queue>.p0 .. <queue>.p<N-1>, behind <queue>.partitions."""
    topology = replace(Topology(), ingress_partitions=3)
    assert topology.partition_queues() == tuple(
        f"llm-bot.internal.llmbot.v1.p{n}" for n in range(3)
    )
    assert topology.partition_exchange == "llm-bot.internal.llmbot.v1.partitions"
    assert set(topology.partition_queues()) <= set(topology.queues())


def test_the_memory_workers_queue_has_no_single_active_consumer_nor_partitions() -> None:
    """Memory jobs are shared by the workers, in no order: one queue, every worker active."""
    memory = replace(Topology(), ingress_partitions=4).for_memory_worker()
    assert "x-single-active-consumer" not in memory.ingress_arguments()
    assert memory.partition_queues() == (memory.ingress_queue,)


def test_another_layouts_queues_are_looked_for_with_what_routed_to_them() -> None:
    """One partition: every numbered partition (from the hash exchange); N: the single queue
    (from the ingress exchange) and the partitions past N."""
    single = old_layout_candidates(Topology())
    assert [name for name, _, _ in single] == [
        f"llm-bot.internal.llmbot.v1.p{n}" for n in range(MAX_PARTITIONS)
    ]
    assert {source for _, source, _ in single} == {"llm-bot.internal.llmbot.v1.partitions"}
    three = old_layout_candidates(replace(Topology(), ingress_partitions=3))
    assert three[0] == ("llm-bot.internal.llmbot.v1", "internal", "internal.llmbot.v1")
    assert [name for name, _, _ in three[1:]] == [
        f"llm-bot.internal.llmbot.v1.p{n}" for n in range(3, MAX_PARTITIONS)
    ]
