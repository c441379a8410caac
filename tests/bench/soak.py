"""Soak under faults: consumer processes killed with SIGKILL and the broker restarted mid-run.

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.soak --events 5000 --conversations 200 --consumers 3 \
        --kills 2 --broker-restarts 1

Publishes N message events round-robin over C conversations, all at once (one ordered
publish stream per conversation) or at ``--rate`` events/s, to consumer processes (fake
model in this process, logs in a printed temp dir). At seeded random points of progress
(share of events answered) it kills a consumer with SIGKILL (starting a replacement) or
stops the broker's app for ``--broker-down`` seconds (with broker restarts, the run uses a
RabbitMQ node of its own, started for it: the machine's broker is never stopped). It waits until every event has a
candidate, then checks effectively-once: one candidate id per event, every turn once in
memory, nothing dead-lettered; exit code 0 only when all of that holds. Its queues and
Redis keys are deleted at the end.

``--poison-percent P`` mixes protocol-level poison into the streams (P% of ``--events``
more events, valid bodies with a property or header no decoder takes: the kinds of
``tests/support/poison.py`` in turn). Then the DLQ must hold exactly the poison, each
with an ErrorV1, and no innocent event: 0 innocent dead-lettered, 0 lost, 0 duplicates.

    .venv/bin/python -m tests.bench.soak --events 5000 --poison-percent 1 --kills 0 \
        --broker-restarts 0

On clusters of its own (SPEC 7.2): ``--redis-cluster`` runs against a 3-master, 3-replica
Redis Cluster (``tests/support/redis_cluster.py``) and ``--redis-failovers F`` promotes a
random master's replica (``CLUSTER FAILOVER``) F times; ``--rabbit-cluster`` runs against a
3-node RabbitMQ cluster (``tests/support/rabbit_cluster.py``, ``AMQP_URL`` listing the
nodes) and ``--node-kills K`` kills a random node with SIGKILL K times, restarting it after
``--broker-down`` seconds (the publisher stays on the first node, which is never killed).

    .venv/bin/python -m tests.bench.soak --events 3000 --conversations 100 --kills 1 \
        --broker-restarts 0 --redis-cluster --redis-failovers 2 --rabbit-cluster --node-kills 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from llm_bot.adapters import amqp_text
from llm_bot.bootstrap import memory_store, redis_client
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, Received, integrator, settings_for_test
from tests.support.poison import POISONS
from tests.support.processes import ConsumerProcess
from tests.support.rabbit_cluster import RabbitClusterNodes, rabbit_cluster
from tests.support.redis_cluster import RedisClusterNodes, redis_cluster
from tests.support.service_control import PrivateRabbit, private_rabbit
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

TENANT = "soak"
Publish = tuple[dict[str, Any], dict[str, Any]]
"""An event and the keyword arguments of its publish (poisoned properties or none)."""


class Soak:
    def __init__(self, args: argparse.Namespace, settings: Settings, log_dir: Path) -> None:
        self.args, self.settings, self.log_dir = args, settings, log_dir
        self.rng = random.Random(args.seed)
        self.convs = [new_id("c") for _ in range(args.conversations)]
        # A user per conversation: on a Redis Cluster their keys spread over the masters.
        self.users = {conv: new_id("u") for conv in self.convs}
        self.events = [
            message_event(tenant=TENANT, user=self.users[conv], conversation=conv, text=f"soak {i}")
            for i, conv in ((i, self.convs[i % len(self.convs)]) for i in range(args.events))
        ]
        self.ids = [str(e["id"]) for e in self.events]
        self.by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in self.events:
            self.by_conv[event["conversation_id"]].append(event)
        self.poison = self.poisoned(round(args.events * args.poison_percent / 100))
        self.poison_ids = {str(event["id"]) for event, _ in self.poison}
        self.dead_lettered: list[str] = []
        self.received: list[Received] = []
        self.answered: set[str] = set()
        self.procs: list[ConsumerProcess] = []
        self.timeline: list[str] = []
        self.publish_retries = 0
        self.broker_down = False
        self.broker: PrivateRabbit | None = None
        self.redis_nodes: RedisClusterNodes | None = None
        self.rabbit_nodes: RabbitClusterNodes | None = None
        """The node the run stops and starts (its own), when it restarts the broker."""
        self.started = time.perf_counter()

    def poisoned(self, count: int) -> list[Publish]:
        """Valid bodies with a poisoned property or header, one kind after another."""
        kinds = list(POISONS.values())
        return [
            (
                message_event(
                    tenant=TENANT, user=self.users[conv], conversation=conv, text=f"poison {i}"
                ),
                kinds[i % len(kinds)][0],
            )
            for i, conv in ((i, self.rng.choice(self.convs)) for i in range(count))
        ]

    def streams(self) -> list[list[Publish]]:
        """What each publisher sends in order: good events, poison at seeded points."""
        if self.args.rate > 0:
            streams: list[list[Publish]] = [[(event, {}) for event in self.events]]
        else:
            streams = [[(event, {}) for event in events] for events in self.by_conv.values()]
        for item in self.poison:
            if self.args.rate > 0:
                stream = streams[0]
            else:
                stream = streams[self.convs.index(item[0]["conversation_id"])]
            stream.insert(self.rng.randint(0, len(stream)), item)
        return streams

    def own_broker(self) -> PrivateRabbit:
        if self.broker is None:
            raise RuntimeError("broker restarts need the run's own RabbitMQ node")
        return self.broker

    def now(self) -> float:
        return time.perf_counter() - self.started

    def note(self, what: str) -> None:
        line = f"t={self.now():7.1f}s answered={len(self.answered):5d}  {what}"
        self.timeline.append(line)
        print(line, flush=True)

    async def spawn(self) -> ConsumerProcess:
        proc = ConsumerProcess(
            self.settings, log_path=self.log_dir / f"consumer{len(self.procs)}.log"
        )
        self.procs.append(proc)
        await proc.start()
        await proc.wait_ready(within=60)
        return proc

    async def publish(self, client: Integrator) -> None:
        """Steady pace in one stream, or all at once: one ordered stream per conversation."""
        streams = self.streams()
        await asyncio.gather(*(self.publish_stream(client, items) for items in streams))
        self.note(
            f"all {len(self.events)} events and {len(self.poison)} poison published "
            f"({self.publish_retries} retries)"
        )

    async def publish_stream(self, client: Integrator, items: list[Publish]) -> None:
        for i, (event, properties) in enumerate(items):
            while True:
                try:
                    await asyncio.wait_for(client.publish(event, **properties), 10)
                    break
                except Exception:  # noqa: BLE001  # broker down: retry; a copy may have landed
                    self.publish_retries += 1
                    await asyncio.sleep(0.5)
            if self.args.rate > 0:
                wake = self.started + (i + 1) / self.args.rate
                await asyncio.sleep(max(0.0, wake - time.perf_counter()))

    async def collect(self, client: Integrator) -> None:
        while True:
            candidate = await client.candidates.get()
            self.received.append(candidate)
            self.answered.add(candidate.body["event_id"])

    async def faults(self, client: Integrator) -> None:
        kinds = ["kill"] * self.args.kills + ["broker"] * self.args.broker_restarts
        kinds += ["failover"] * self.args.redis_failovers + ["node"] * self.args.node_kills
        self.rng.shuffle(kinds)
        points = sorted(self.rng.uniform(0.1, 0.9) for _ in kinds)
        for kind, point in zip(kinds, points, strict=True):
            while len(self.answered) < point * len(self.ids):
                await asyncio.sleep(0.05)
            backlog = f"ingress ready={await depth(client, self.settings.ingress_queue)}"
            if kind == "kill":
                victim = self.rng.choice(self.live())
                victim.kill()
                assert victim.process is not None
                await victim.process.wait()
                self.note(f"SIGKILL {victim.log_path.name} ({backlog})")
                proc = await self.spawn()
                self.note(f"replacement {proc.log_path.name} ready")
                continue
            if kind == "failover":
                assert self.redis_nodes is not None
                master = self.rng.choice(self.redis_nodes.masters())
                promoted = await asyncio.to_thread(self.redis_nodes.failover, master)
                self.note(f"CLUSTER FAILOVER: {master} -> {promoted} ({backlog})")
                continue
            if kind == "node":
                assert self.rabbit_nodes is not None
                victim_node = self.rng.choice(self.rabbit_nodes.nodes[1:])
                await asyncio.to_thread(self.rabbit_nodes.kill, victim_node)
                self.note(f"SIGKILL of broker node {victim_node.node} ({backlog})")
                await asyncio.sleep(self.args.broker_down)
                await asyncio.to_thread(self.rabbit_nodes.restart, victim_node)
                self.note(f"{victim_node.node} back in the cluster")
                continue
            self.note(f"rabbitmqctl -n {self.own_broker().node} stop_app ({backlog})")
            self.broker_down, stopped = True, self.now()
            try:
                await asyncio.to_thread(self.own_broker().stop_app)
                self.note("broker app stopped")
                await asyncio.sleep(self.args.broker_down)
            finally:
                await asyncio.to_thread(self.own_broker().start_app)
                self.broker_down = False
            self.note(f"rabbitmqctl start_app done (broker out {self.now() - stopped:.1f}s)")
            await asyncio.gather(*(p.wait_ready(within=90) for p in self.live()))
            self.note("all consumers ready again")

    def live(self) -> list[ConsumerProcess]:
        return [p for p in self.procs if p.process and p.process.returncode is None]

    async def check_memory(self) -> tuple[Counter[str], list[str], int]:
        """Anomaly counts by kind, examples, conversations whose order differs from publish."""
        turn_of_candidate = {r.body["event_id"]: r.body.get("turn") for r in self.received}
        anomalies: Counter[str] = Counter()
        examples: list[str] = []
        reordered = 0
        client = redis_client(self.settings.redis)
        try:
            store = memory_store(self.settings, client)
            for conv, events in self.by_conv.items():
                ids = [str(e["id"]) for e in events]
                trace = await store.raw_trace(ConversationKey(TENANT, self.users[conv], conv))
                users = [(m.turn, m.event_id) for m in trace if m.role == "user"]
                replies = [(m.turn, m.event_id) for m in trace if m.role == "assistant"]
                seen = Counter(event_id for _, event_id in users)
                found = Counter(
                    {
                        "event missing": sum(1 for i in ids if seen[i] == 0),
                        "event doubled": sum(1 for i in ids if seen[i] > 1),
                        "foreign event": len(set(seen) - set(ids)),
                        "turns not 1..n": int(
                            [t for t, _ in users] != list(range(1, len(users) + 1))
                        ),
                        "user/assistant mismatch": int(users != replies),
                        "candidate turn != memory turn": sum(
                            1 for t, i in users if turn_of_candidate.get(i or "") != t
                        ),
                    }
                )
                reordered += [i for _, i in users] != ids
                for kind, count in (+found).items():
                    examples.append(f"{conv}: {kind} x{count}")
                anomalies.update(found)
        finally:
            await client.aclose()
        return +anomalies, examples, reordered

    async def forget(self) -> None:
        client = redis_client(self.settings.redis)
        try:
            store = memory_store(self.settings, client)
            for user in self.users.values():
                await store.forget_user(TENANT, user)
        finally:
            await client.aclose()


async def depth(client: Integrator, queue: str) -> int:
    """Ready messages, from a fresh channel: a robust channel's passive declare is cached."""
    await asyncio.wait_for(client.connection.connected.wait(), 60)  # after a broker restart
    channel = await client.connection.channel()
    try:
        declared = await channel.declare_queue(queue, passive=True, robust=False)
        return int(declared.declaration_result.message_count or 0)
    finally:
        await channel.close()


def log_summary(log_dir: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in sorted(log_dir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
                counts[f"{record.get('level', '?')} {record.get('event', '?')}"] += 1
            except (ValueError, AttributeError):
                words = line.split()
                stdlib = len(words) > 1 and words[0] in {"WARNING", "ERROR", "CRITICAL"}
                counts[f"{words[0]} {words[1]} (plain text)" if stdlib else "(other text)"] += 1
    return counts


async def drive(soak: Soak, client: Integrator) -> tuple[dict[str, int], float]:
    """Consumers up, publish, faults, wait for every candidate; queue depths at the end."""
    tasks: list[asyncio.Task[None]] = []
    try:
        await asyncio.gather(*(soak.spawn() for _ in range(soak.args.consumers)))
        soak.started = time.perf_counter()
        soak.note(f"{soak.args.consumers} consumers ready; publishing")
        for job in (soak.collect(client), soak.faults(client), soak.publish(client)):
            tasks.append(asyncio.create_task(job))
        deadline = time.perf_counter() + soak.args.timeout
        while soak.answered < set(soak.ids) and time.perf_counter() < deadline:
            await asyncio.sleep(0.1)
            for task in tasks:
                if task.done() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        elapsed = soak.now()
        soak.note("every event answered" if soak.answered >= set(soak.ids) else "TIMEOUT")
        async with asyncio.timeout(60):  # every poison dead-lettered (the DLQ copy follows)
            while client.errors.qsize() < len(soak.poison):
                await asyncio.sleep(0.1)
        await asyncio.sleep(soak.args.settle)
        await asyncio.gather(*(p.stop() for p in soak.procs))
        await asyncio.sleep(1)
        dead = await client.dead_letters(await depth(client, soak.settings.dlq), within=60)
        soak.dead_lettered = [str(json.loads(m.body).get("id")) for m in dead]
        return {
            "DLQ depth": len(dead),
            "error events": client.errors.qsize(),
            "ingress left": await depth(client, soak.settings.ingress_queue),
        }, elapsed
    finally:
        for task in tasks:
            task.cancel()
        if soak.broker_down:
            await asyncio.to_thread(soak.own_broker().start_app)
        await asyncio.gather(*(p.stop() for p in soak.procs))
        with contextlib.suppress(TimeoutError):  # the integrator deletes its queues next
            await asyncio.wait_for(client.connection.connected.wait(), 60)


async def run(args: argparse.Namespace) -> int:
    amqp_text.install()  # lets this process publish the poison's raw bytes
    with contextlib.ExitStack() as stack:
        redis_nodes = stack.enter_context(redis_cluster()) if args.redis_cluster else None
        rabbit_nodes = stack.enter_context(rabbit_cluster()) if args.rabbit_cluster else None
        redis_url = (
            redis_nodes.url if redis_nodes else os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
        )
        clusters = Clusters(redis_nodes, rabbit_nodes)
        if redis_nodes:
            print(f"Redis Cluster of this run: {redis_nodes.ports}", flush=True)
        if rabbit_nodes:
            print(
                f"RabbitMQ cluster of this run: {[n.node for n in rabbit_nodes.nodes]}", flush=True
            )
            return await run_on(args, rabbit_nodes.url, redis_url, None, clusters)
        if args.broker_restarts <= 0:
            amqp_url = os.environ.get("AMQP_URL", DEFAULT_AMQP_URL)
            return await run_on(args, amqp_url, redis_url, None, clusters)
        node = stack.enter_context(private_rabbit())
        print(f"broker restarts: on this run's own RabbitMQ node {node.node}", flush=True)
        return await run_on(args, node.url, redis_url, node, clusters)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Clusters:
    """The clusters of this run's own, if any."""

    redis: RedisClusterNodes | None
    rabbit: RabbitClusterNodes | None


async def run_on(
    args: argparse.Namespace,
    amqp_url: str,
    redis_url: str,
    broker: PrivateRabbit | None,
    clusters: Clusters,
) -> int:
    urls = ServiceUrls(amqp_url, redis_url)
    log_dir = Path(tempfile.mkdtemp(prefix="llm-bot-soak-"))
    pace = f"{args.rate:g} events/s" if args.rate > 0 else "all at once"
    print(f"consumer logs: {log_dir}\npublishing {args.events} events, {pace}", flush=True)
    async with FakeModelServer() as fake:
        fake.set_latency(args.latency)
        settings = settings_for_test(
            urls, fake.base_url, prefetch=args.prefetch, lease_seconds=args.lease_seconds,
            max_attempts=args.max_attempts, retry_base_seconds=args.retry_base,
            log_level="warning",
        )  # fmt: skip
        soak = Soak(args, settings, log_dir)
        soak.broker = broker
        soak.redis_nodes, soak.rabbit_nodes = clusters.redis, clusters.rabbit
        try:
            # The publisher and collector stay on the first node (never killed).
            first_node = SecretStr(amqp_url.split(",", maxsplit=1)[0])
            client_settings = settings.model_copy(update={"amqp_url": first_node})
            async with integrator(client_settings, durable=True) as client:
                end, elapsed = await drive(soak, client)
            calls = Counter(str(r.messages()[-1].get("content")) for r in fake.chat_requests())
            return await report(soak, end, calls, elapsed)
        finally:
            await soak.forget()


async def report(soak: Soak, end: dict[str, int], calls: Counter[str], elapsed: float) -> int:
    anomalies, examples, reordered = await soak.check_memory()
    ids_of: dict[str, set[str]] = defaultdict(set)
    texts_of: dict[str, set[str]] = defaultdict(set)
    for r in soak.received:
        ids_of[r.body["event_id"]].add(r.body["id"])
        texts_of[r.body["id"]].add(r.body["text"])
    distinct = {r.body["id"] for r in soak.received}
    lost = [i for i in soak.ids if i not in ids_of]
    innocent_dead = [i for i in soak.dead_lettered if i not in soak.poison_ids]
    poison_kept = soak.poison_ids - set(soak.dead_lettered)
    answered_poison = soak.poison_ids & set(ids_of)
    double = [i for i, c in ids_of.items() if len(c) > 1]
    two_texts = sum(1 for t in texts_of.values() if len(t) > 1)
    rows: list[tuple[str, object]] = [
        ("events in", len(soak.ids)),
        ("publish retries", soak.publish_retries),
        ("candidate deliveries", len(soak.received)),
        ("distinct candidate ids", len(distinct)),
        ("duplicate candidate deliveries", len(soak.received) - len(distinct)),
        ("events with two candidate ids", len(double)),
        ("candidate ids with two texts", two_texts),
        ("lost events (no candidate)", len(lost)),
        ("poison published", len(soak.poison)),
        ("poison not dead-lettered", len(poison_kept)),
        ("poison answered", len(answered_poison)),
        ("innocent events dead-lettered", len(innocent_dead)),
        ("memory anomalies", sum(anomalies.values())),
        ("conversations not in publish order (info)", reordered),
        ("model calls", sum(calls.values())),
        ("events with 2+ model calls", sum(1 for c in calls.values() if c > 1)),
        *end.items(),
        ("elapsed to last first candidate (s)", f"{elapsed:.1f}"),
        ("events/s", f"{len(soak.ids) / elapsed:.1f}"),
    ]
    print("\n== soak summary ==")
    for name, value in rows:
        print(f"{name:44s} {value}")
    for kind, count in anomalies.items():
        print(f"  memory: {kind}: {count}")
    for line in examples[:20]:
        print(f"  e.g. {line}")
    for label, ids in (("lost", lost), ("two candidate ids", double)):
        if ids:
            print(f"  {label}: {ids[:20]}")
    print("fault timeline:\n  " + "\n  ".join(soak.timeline))
    print("consumer log lines (warning+):")
    for name, count in log_summary(soak.log_dir).most_common():
        print(f"  {count:6d}  {name}")
    print(f"consumer logs: {soak.log_dir}")
    ok = (
        not lost
        and not double
        and not anomalies
        and not two_texts
        and not innocent_dead
        and not poison_kept
        and not answered_poison
        and end["DLQ depth"] == len(soak.poison) == end["error events"]
    )
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("aio_pika", "aiormq"):  # this process's own reconnects are expected noise
        logging.getLogger(name).setLevel(logging.CRITICAL)
    add = parser.add_argument
    add("--events", type=int, default=5000)
    add("--conversations", type=int, default=200)
    add("--consumers", type=int, default=3)
    add("--kills", type=int, default=2)
    add("--broker-restarts", type=int, default=1)
    add("--broker-down", type=float, default=5.0, help="seconds between stop_app and start_app")
    add("--poison-percent", type=float, default=0.0, help="protocol-level poison, %% of events")
    add("--seed", type=int, default=1)
    add("--timeout", type=float, default=900.0)
    add("--settle", type=float, default=5.0)
    add("--rate", type=float, default=0.0, help="events/s published; 0 = all at once")
    add("--latency", type=float, default=0.02, help="fake model latency in seconds")
    add("--prefetch", type=int, default=8)
    add("--lease-seconds", type=float, default=3.0)
    add("--max-attempts", type=int, default=10)
    add("--retry-base", type=float, default=0.3)
    add("--redis-cluster", action="store_true", help="a 3-master Redis Cluster of its own")
    add("--redis-failovers", type=int, default=0, help="CLUSTER FAILOVERs (--redis-cluster)")
    add("--rabbit-cluster", action="store_true", help="a 3-node RabbitMQ cluster of its own")
    add("--node-kills", type=int, default=0, help="broker node SIGKILLs (--rabbit-cluster)")
    args = parser.parse_args()
    if args.redis_failovers and not args.redis_cluster:
        parser.error("--redis-failovers needs --redis-cluster")
    if args.node_kills and not args.rabbit_cluster:
        parser.error("--node-kills needs --rabbit-cluster")
    if args.rabbit_cluster and args.broker_restarts:
        parser.error("--rabbit-cluster kills nodes (--node-kills) instead of --broker-restarts")
    if args.consumers < 1 or args.events < 1 or args.conversations < 1:
        parser.error("--consumers, --events and --conversations must be at least 1")
    raise SystemExit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
