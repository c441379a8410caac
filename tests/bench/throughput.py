"""Throughput: the llm-bot pipeline against a plain aio-pika echo, on the same broker.

Run by hand (not part of `make test`, not collected by pytest):

    .venv/bin/python -m tests.bench.throughput

One run measures, on the RabbitMQ and Redis at AMQP_URL / REDIS_URL:

(a) baseline: a plain aio-pika echo. A durable quorum queue (like the ingress queue) is
    filled with N event bodies; an echo consumer (manual ack, prefetch P) publishes each
    body back with publisher confirms (persistent, mandatory) and then acks; a collector
    on its own connection consumes the replies (as the integrator does for candidates).
(b) the llm-bot pipeline in-process (``tests.support.harness.bot``, default wiring: no
    span exporter, log level ``--log-level``) with the fake model in its own process
    (the provider's CPU is not the service's; ``--fake-in-process`` puts it back in this
    process) answering at once: N message events over M conversations, prefetch P.
(c) the same pipeline with the fake model answering after 200 ms, prefetch 32, over at
    least 32 conversations; efficiency = events/s / (prefetch / latency).
(c') the (c) backlog through ``--replicas`` ``llm-bot run`` processes sharing the same 32
    in flight (prefetch 32 / R each): the scale-out path, CPU summed over the replicas.
(d) per-event overhead outside the model, with the instant model and events published at
    a steady rate well below capacity (so that queueing does not dominate), after one
    untimed event has loaded the user's index into the replica: for each
    event, end to end = publish → candidate received, model time = the duration of the
    service's own ``chat <model>`` CLIENT span (the openai SDK call, HTTP included; spans
    go to an in-memory exporter); overhead = end to end - model time.
(e) Redis per event: ``INFO commandstats`` before and after (b) (every command the
    server ran, commands inside Lua scripts included, but server-wide: other users of
    the Redis show up too); ``MONITOR`` during (d), counting only commands on this
    session's key prefix (commands run by a script are tagged ``lua``); and, over (b),
    the redis-py connection wrapped to count writes to the socket (round trips: a
    pipeline or an EVALSHA is one) and the commands packed into them.

Events are a user's whose index holds ``--index-entries`` messages (1,000 by default,
``tests/bench/user_history.py``), so each reply searches a real history; (b), (c) and (d)
report their recall searches by outcome and how many timed out (the reply then went on
without recall), against a target of at most 0.1 %.

(f) the floor: the libraries the pipeline is built on (LangGraph, the openai SDK, redis-py,
    aio-pika, OpenTelemetry), each doing its share of one event's work with no llm-bot
    code, alone and all together (``tests/bench/floor.py``); with the echo's CPU it bounds
    (b)/(a) for any pipeline built on them.

For (a), (b), (c) and (c') the ingress queue is filled before consuming starts, so the
figure is the consumer's steady rate with a backlog, not the publisher's: events/s =
(N - 1) / (last reply received - first reply received). Each also reports CPU time per
event (this process, all threads, first to last reply; for (c') the replicas' from
``/proc``), which on a shared machine is steadier than events/s, and how busy that makes
the process: near 100% of a core means the figure is CPU-bound.

``--only-b`` runs (b) alone, to profile it from outside; ``--summarize`` reads the
profile (see the "profile" section below).

``--redis-cluster R`` runs (b) alone 2R times, alternating the Redis at REDIS_URL and a
3-master, 3-replica Redis Cluster the bench starts on free ports, embeddings off, and
prints events/s, CPU and redis-py round trips per event of each (keys on the cluster go
with its nodes).

``--rabbit-cluster R`` runs (b) alone 2R times, alternating the RabbitMQ at AMQP_URL and
a 3-node RabbitMQ cluster the bench starts on free ports (AMQP_URL listing its nodes),
embeddings off, and prints events/s and CPU per event of each.

``--fairness-ab R`` runs (b) alone 2R times, alternating ``LLM_BOT_FAIR_DISPATCH`` off and
on (off first), embeddings off, and prints the CPU per event of each and the median
difference: what fair dispatch (hand-off to Redis, takes and completions) adds to the
reply path.

Queues are deleted at the end (the harness's integrator deletes the service's), and so
are the Redis keys under this session's test prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aio_pika
import redis.asyncio as aioredis
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry
from redis.asyncio.connection import AbstractConnection

from llm_bot.adapters.rabbit_connection import connect_amqp_robust
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.logs import configure_logging
from tests.bench.floor import Floor, measure_floor
from tests.bench.processes import cpu_seconds, fake_model_process, replicas
from tests.bench.retrieval_latency import QUESTIONS, TOPICS
from tests.bench.user_history import TENANT, RetrievalOutcomes, fill_index
from tests.support.events import encode, message_event, new_id
from tests.support.harness import (
    TEST_KEY_PREFIX,
    Integrator,
    bot,
    integrator,
    settings_for_test,
)
from tests.support.rabbit_cluster import rabbit_cluster
from tests.support.redis_cluster import redis_cluster
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

TARGET_RATIO = 0.15
TARGET_EFFICIENCY = 0.9
TARGET_ROUND_TRIPS = 6.0
TARGET_CPU_RATIO = 2.0
TARGET_TIMEOUT_SHARE = 0.001
PREFILL_CONCURRENCY = 256
WAIT_SECONDS = 120.0


# --------------------------------------------------------------------------- inputs


def question(n: int) -> str:
    """The ``n``-th message: a question about the bench user's history, of 68 (17 topics,
    4 phrasings), so that consecutive messages of a conversation are not all on one topic
    (a message on its conversation's topic reuses the last search rather than searching)."""
    return QUESTIONS[n % len(QUESTIONS)].format(topic=TOPICS[(n * 7) % len(TOPICS)])


def event_bodies(
    count: int, conversations: int, user: str | None = None
) -> list[tuple[str, bytes]]:
    """``count`` message events round-robin over ``conversations`` (one user, one tenant;
    ``user``: the bench user with a history, else a new one)."""
    user = user or new_id("u")
    convs = [new_id("c") for _ in range(conversations)]
    bodies = []
    for i in range(count):
        event = message_event(
            tenant=TENANT,
            user=user,
            conversation=convs[i % conversations],
            text=question(i),
        )
        bodies.append((str(event["id"]), encode(event)))
    return bodies


def persistent(event_id: str, body: bytes) -> aio_pika.Message:
    return aio_pika.Message(
        body,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=event_id,
    )


async def prefill(
    exchange: AbstractExchange, routing_key: str, bodies: Sequence[tuple[str, bytes]]
) -> None:
    """Publish every body (confirmed), ``PREFILL_CONCURRENCY`` in flight at a time."""
    for start in range(0, len(bodies), PREFILL_CONCURRENCY):
        batch = bodies[start : start + PREFILL_CONCURRENCY]
        await asyncio.gather(
            *(exchange.publish(persistent(i, b), routing_key, mandatory=True) for i, b in batch)
        )


# --------------------------------------------------------------------------- (a) echo


class CpuClock:
    """Process CPU time at the first and the last of a series of ticks."""

    def __init__(self) -> None:
        self.first = self.last = 0.0
        self.ticks = 0

    def tick(self, _: object = None) -> None:
        now = time.process_time()
        if self.ticks == 0:
            self.first = now
        self.last = now
        self.ticks += 1

    def per_tick(self) -> float:
        return (self.last - self.first) / max(1, self.ticks - 1)


@dataclass
class Rate:
    events: int
    seconds: float
    cpu_per_event: float
    """This process's CPU seconds (all threads) per event between the first and the last
    reply: steadier than events/s on a shared machine."""

    @property
    def per_second(self) -> float:
        return self.events / self.seconds


async def echo_baseline(amqp_url: str, events: int, prefetch: int) -> Rate:
    """(a): queue → echo consumer (manual ack) → confirmed publish → ack → collector."""
    suffix = uuid.uuid4().hex[:10]
    in_key, out_key = f"bench.echo.t{suffix}.in", f"bench.echo.t{suffix}.out"
    in_queue_name = f"bench.echo.{suffix}"
    bodies = event_bodies(events, 100)
    first_reply = last_reply = 0.0
    replies = 0
    done = asyncio.Event()

    cpu = CpuClock()

    async def collect(message: AbstractIncomingMessage) -> None:
        nonlocal first_reply, last_reply, replies
        async with message.process():
            json.loads(message.body)
            replies += 1
            cpu.tick()
            if replies == 1:
                first_reply = time.time()
            if replies == events:
                last_reply = time.time()
                done.set()

    async def echo(exchange: AbstractExchange, message: AbstractIncomingMessage) -> None:
        reply = aio_pika.Message(
            message.body,
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=message.message_id,
            correlation_id=message.correlation_id,
        )
        await exchange.publish(reply, out_key, mandatory=True, timeout=15)
        await message.ack()

    collector = await aio_pika.connect_robust(amqp_url)
    echoer = await aio_pika.connect_robust(amqp_url)
    try:
        channel = await collector.channel()
        exchange = await channel.declare_exchange(
            "internal", aio_pika.ExchangeType.TOPIC, durable=True
        )
        out_queue = await channel.declare_queue(exclusive=True, auto_delete=True)
        await out_queue.bind(exchange, out_key)
        await out_queue.consume(collect)
        in_queue = await channel.declare_queue(
            in_queue_name, durable=True, arguments={"x-queue-type": "quorum"}
        )
        await in_queue.bind(exchange, in_key)
        await prefill(exchange, in_key, bodies)

        echo_channel = await echoer.channel(publisher_confirms=True, on_return_raises=True)
        await echo_channel.set_qos(prefetch_count=prefetch)
        echo_exchange = await echo_channel.get_exchange("internal")
        echo_queue = await echo_channel.get_queue(in_queue_name)
        tag = await echo_queue.consume(functools.partial(echo, echo_exchange), no_ack=False)
        await asyncio.wait_for(done.wait(), WAIT_SECONDS)
        await echo_queue.cancel(tag)
        return Rate(events - 1, last_reply - first_reply, cpu.per_tick())
    finally:
        with contextlib.suppress(Exception):
            cleanup = await collector.channel()
            await cleanup.queue_delete(in_queue_name)
        await echoer.close()
        await collector.close()


# --------------------------------------------------------------------------- (e) Redis


@dataclass
class RedisTally:
    """What the service's redis-py connections sent (patched in for one phase)."""

    round_trips: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0


@contextlib.contextmanager
def counting_redis() -> Iterator[RedisTally]:
    """Count socket writes (round trips) and packed commands of every redis-py asyncio
    connection while inside; a pipeline is one write of several commands, an EVALSHA one
    write of one command (whatever the script runs inside Redis)."""
    tally = RedisTally()
    send = AbstractConnection.send_packed_command
    pack = AbstractConnection.pack_command

    async def counted_send(self: AbstractConnection, *args: Any, **kwargs: Any) -> None:
        tally.round_trips += 1
        packed = args[0]
        tally.bytes_sent += (
            len(packed) if isinstance(packed, bytes | str) else sum(len(p) for p in packed)
        )
        await send(self, *args, **kwargs)

    def counted_pack(self: AbstractConnection, *args: Any) -> list[bytes]:
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        tally.commands[name.split(" ")[0].upper()] += 1
        return pack(self, *args)

    AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign]
    AbstractConnection.pack_command = counted_pack  # type: ignore[method-assign]
    try:
        yield tally
    finally:
        AbstractConnection.send_packed_command = send  # type: ignore[method-assign]
        AbstractConnection.pack_command = pack  # type: ignore[method-assign]


async def command_stats(client: aioredis.Redis) -> Counter[str]:
    """Calls per command from ``INFO commandstats`` (server-wide)."""
    info = await client.info("commandstats")
    return Counter(
        {name.removeprefix("cmdstat_"): int(stats["calls"]) for name, stats in info.items()}
    )


@contextlib.asynccontextmanager
async def monitored(redis_url: str) -> AsyncIterator[Counter[str]]:
    """Commands on this session's keys (test prefix) as ``MONITOR`` shows them, whoever
    else uses the Redis; commands run inside scripts are shown (``lua``) and counted."""
    seen: Counter[str] = Counter()
    client = aioredis.from_url(redis_url)

    async def listen() -> None:
        async with client.monitor() as monitor:
            ready.set()
            async for command in monitor.listen():
                text = str(command["command"])
                if TEST_KEY_PREFIX in text:
                    name = text.split(" ", 1)[0].lower()
                    seen["lua:" + name if command["client_type"] == "lua" else name] += 1

    ready = asyncio.Event()
    listener = asyncio.create_task(listen())
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.sleep(0.2)
        yield seen
        await asyncio.sleep(0.5)  # let the last commands arrive
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await listener
        await client.aclose()


@dataclass
class RedisPerEvent:
    server_commands: float
    """``INFO commandstats`` delta / events (script-internal commands included)."""
    server_breakdown: dict[str, float]
    round_trips: float
    bytes_sent: float
    client_commands: float
    client_breakdown: dict[str, float]
    script_internal: float
    """Server commands not sent by a client: run inside EVAL/EVALSHA."""


# --------------------------------------------------------------------------- (b)/(c)


@dataclass
class PipelineRun:
    rate: Rate
    redis: RedisPerEvent | None = None
    problems: list[str] = field(default_factory=list)
    retrieval: RetrievalOutcomes | None = None


@contextlib.asynccontextmanager
async def prefilled(settings: Settings, bodies: Sequence[tuple[str, bytes]]) -> AsyncIterator[None]:
    """Declare the service's topology and fill its ingress queue (deleted on exit), so
    consuming starts with the whole backlog waiting."""
    connection = await connect_amqp_robust(settings.amqp_url.get_secret_value())
    try:
        channel = await connection.channel()
        declared = await declare_topology(channel, Topology.from_settings(settings.broker))
        await prefill(declared.exchange, settings.ingress_routing_key, bodies)
        yield
    finally:
        with contextlib.suppress(Exception):  # when bot() did not get to delete them
            cleanup = await connection.channel()
            for name in Topology.from_settings(settings.broker).queues():
                await cleanup.queue_delete(name)
        await connection.close()


async def await_candidates(
    client: Integrator, expected: set[str], on_candidate: Callable[[str], object] | None = None
) -> list[str]:
    """Wait for a candidate of every expected event; returns the problems seen."""
    problems = []
    seen: set[str] = set()
    while seen != expected:
        received = await client.next_candidate(within=WAIT_SECONDS)
        event_id = str(received.body["event_id"])
        if event_id in seen or event_id not in expected:
            problems.append(f"unexpected or repeated candidate for {event_id}")
        seen.add(event_id)
        if on_candidate is not None:
            on_candidate(event_id)
    if not client.errors.empty():
        problems.append(f"{client.errors.qsize()} ErrorV1 events")
    if dead := await client.queue_depth(client.settings.dlq):
        problems.append(f"{dead} dead letters")
    return problems


@contextlib.asynccontextmanager
async def model_endpoint(latency: float, *, in_process: bool) -> AsyncIterator[str]:
    """The fake model's base URL: in its own process (the provider's CPU is not the
    service's; the default), or in this process and event loop (``--fake-in-process``)."""
    if in_process:
        async with FakeModelServer() as fake:
            fake.set_latency(latency)
            yield fake.base_url
    else:
        async with fake_model_process(latency) as base_url:
            yield base_url


class Replies:
    """Times and this process's CPU at the first and the last reply."""

    def __init__(self) -> None:
        self.cpu = CpuClock()
        self.first = self.last = 0.0

    def tick(self, _: object = None) -> None:
        self.last = time.time()
        if self.cpu.ticks == 0:
            self.first = self.last
        self.cpu.tick()

    def rate(self, events: int) -> Rate:
        """Steady rate between the first and the last reply (events - 1 intervals)."""
        return Rate(events - 1, self.last - self.first, self.cpu.per_tick())


def model_calls(registry: CollectorRegistry) -> int:
    return int(
        registry.get_sample_value(
            "llmbot_model_request_duration_seconds_count", {"api": "chat", "result": "ok"}
        )
        or 0
    )


async def pipeline(
    urls: ServiceUrls,
    *,
    events: int,
    conversations: int,
    latency: float,
    prefetch: int,
    count_redis: bool,
    fake_in_process: bool,
    fair_dispatch: bool = True,
    embeddings: str | None = None,
    user: str | None = None,
    embedding_model: str | None = None,
) -> PipelineRun:
    """(b) (with ``count_redis``: and (e)) or (c): the backlog through the service, as
    ``user`` (the bench user with a history; default: a new user)."""
    bodies = event_bodies(events, conversations, user)
    replies = Replies()
    registry = CollectorRegistry()
    async with model_endpoint(latency, in_process=fake_in_process) as base_url:
        settings = settings_for_test(
            urls,
            base_url,
            prefetch=prefetch,
            fair_dispatch=fair_dispatch,
            **({"embeddings": embeddings} if embeddings else {}),
            **({"embedding_model": embedding_model} if embedding_model else {}),
        )
        stats = aioredis.from_url(urls.redis_url)
        try:
            before = await command_stats(stats)
            with counting_redis() as tally:
                async with (
                    prefilled(settings, bodies),
                    bot(settings, registry=registry) as (_, client),
                ):
                    problems = await await_candidates(client, {i for i, _ in bodies}, replies.tick)
            after = await command_stats(stats)
        finally:
            await stats.aclose()
    if (calls := model_calls(registry)) != events:
        problems.append(f"{calls} model calls for {events} events")
    redis = per_event(before, after, tally, events) if count_redis else None
    return PipelineRun(replies.rate(events), redis, problems, RetrievalOutcomes.read(registry))


@dataclass
class ReplicatedRun:
    replicas: int
    rate: Rate
    """``cpu_per_event``: the replicas' CPU (all of them, from ``/proc``), not this process's."""
    problems: list[str]


async def replicated(
    urls: ServiceUrls,
    *,
    events: int,
    conversations: int,
    latency: float,
    prefetch: int,
    count: int,
    log_level: str,
) -> ReplicatedRun:
    """(c'): the (c) backlog through ``count`` ``llm-bot run`` processes sharing the
    in-flight budget (``prefetch // count`` each), the fake model in its own process."""
    async with fake_model_process(latency) as base_url:
        return await replicated_on(
            urls,
            base_url,
            events=events,
            conversations=conversations,
            prefetch=prefetch,
            count=count,
            log_level=log_level,
        )


async def replicated_on(
    urls: ServiceUrls,
    model_url: str,
    *,
    events: int,
    conversations: int,
    prefetch: int,
    count: int,
    log_level: str,
    beside: contextlib.AbstractAsyncContextManager[object] | None = None,
) -> ReplicatedRun:
    """(c') with the model at ``model_url`` (already running: ``tests/bench/
    inspector_beside.py`` runs several backlogs on one fake model); ``beside`` is entered
    once the replicas are ready and left once every candidate arrived (a load beside
    them)."""
    bodies = event_bodies(events, conversations)
    replies = Replies()
    cpu: list[float] = []
    settings = settings_for_test(urls, model_url, prefetch=prefetch // count, log_level=log_level)
    async with (
        prefilled(settings, bodies),
        integrator(settings) as client,
        replicas(settings, count) as procs,
        beside or contextlib.nullcontext(),
    ):
        pids = [p.process.pid for p in procs if p.process is not None]

        def tick(event_id: str) -> None:
            replies.tick(event_id)
            if replies.cpu.ticks in (1, events):
                cpu.append(sum(cpu_seconds(pid) for pid in pids))

        problems = await await_candidates(client, {i for i, _ in bodies}, tick)
    rate = replies.rate(events)
    rate.cpu_per_event = (cpu[-1] - cpu[0]) / max(1, events - 1)
    return ReplicatedRun(count, rate, problems)


def per_event(
    before: Counter[str], after: Counter[str], tally: RedisTally, events: int
) -> RedisPerEvent:
    server = after - before
    server.pop("info", None)  # this bench's own INFO commandstats
    client = tally.commands
    sent = client.total()
    return RedisPerEvent(
        server_commands=server.total() / events,
        server_breakdown={k: v / events for k, v in server.most_common()},
        round_trips=tally.round_trips / events,
        bytes_sent=tally.bytes_sent / events,
        client_commands=sent / events,
        client_breakdown={k: v / events for k, v in client.most_common()},
        script_internal=(server.total() - sent) / events,
    )


# --------------------------------------------------------------------------- (d)


@dataclass
class Overhead:
    events: int
    rate: float
    end_to_end: list[float]
    model: list[float]
    overhead: list[float]
    in_service: list[float]
    problems: list[str]
    redis_commands: Counter[str]
    """Commands on this bench's keys seen by ``MONITOR`` (``lua:`` = inside a script)."""
    retrieval: RetrievalOutcomes


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def overhead(
    urls: ServiceUrls,
    *,
    events: int,
    conversations: int,
    rate: float,
    prefetch: int,
    fake_in_process: bool,
    user: str | None = None,
    embedding_model: str | None = None,
) -> Overhead:
    """(d): steady publishing, end to end per event minus its model span."""
    bodies = event_bodies(events, conversations, user)
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sent: dict[str, float] = {}
    received: dict[str, float] = {}
    async with model_endpoint(0.0, in_process=fake_in_process) as base_url:
        settings = settings_for_test(
            urls,
            base_url,
            prefetch=prefetch,
            **({"embedding_model": embedding_model} if embedding_model else {}),
        )
        async with (
            monitored(urls.redis_url) as isolated,
            bot(settings, tracer_provider=provider, registry=registry) as (_, client),
        ):
            # The steady state: the user's index loaded in this replica by a first event
            # (a cold load is (b)'s and the recall benches' `--cold`), not timed.
            warm_up = json.loads(event_bodies(1, 1, user)[0][1])
            await client.publish(warm_up)
            await await_candidates(client, {str(warm_up["id"])})
            exporter.clear()
            async with asyncio.TaskGroup() as group:
                collecting = group.create_task(
                    await_candidates(
                        client,
                        {i for i, _ in bodies},
                        lambda event_id: received.setdefault(event_id, time.perf_counter()),
                    )
                )
                start = time.perf_counter()
                for n, (event_id, body) in enumerate(bodies):
                    await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
                    sent[event_id] = time.perf_counter()
                    await client.publish(json.loads(body))
            problems = collecting.result()
    model_by_trace, event_by_trace, process_by_trace = spans_by_trace(exporter.get_finished_spans())
    model: dict[str, float] = {}
    in_service: dict[str, float] = {}
    for trace_id, event_id in event_by_trace.items():
        model[event_id] = model_by_trace.get(trace_id, 0.0)
        in_service[event_id] = process_by_trace[trace_id]
    ids = [i for i, _ in bodies if i in model]
    if len(ids) != events:
        problems.append(f"spans found for {len(ids)} of {events} events")
    e2e = [received[i] - sent[i] for i in ids]
    return Overhead(
        events=events,
        rate=rate,
        end_to_end=e2e,
        model=[model[i] for i in ids],
        overhead=[received[i] - sent[i] - model[i] for i in ids],
        in_service=[in_service[i] - model[i] for i in ids],
        problems=problems,
        redis_commands=isolated,
        retrieval=RetrievalOutcomes.read(registry),
    )


def spans_by_trace(
    spans: Sequence[ReadableSpan],
) -> tuple[dict[int, float], dict[int, str], dict[int, float]]:
    """Per trace: the model (CLIENT ``chat``) span's seconds, the event id and the
    consumer (``process``) span's seconds."""
    model: dict[int, float] = {}
    event: dict[int, str] = {}
    process: dict[int, float] = {}
    for span in spans:
        if span.context is None or span.start_time is None or span.end_time is None:
            continue
        seconds = (span.end_time - span.start_time) / 1e9
        trace_id = span.context.trace_id
        if span.kind == SpanKind.CLIENT and span.name.startswith("chat "):
            model[trace_id] = model.get(trace_id, 0.0) + seconds
        elif span.kind == SpanKind.CONSUMER and span.name.startswith("process "):
            event[trace_id] = str((span.attributes or {}).get("messaging.message.id"))
            process[trace_id] = seconds
    return model, event, process


# --------------------------------------------------------------------------- report


@dataclass
class Results:
    echo: Rate
    instant: PipelineRun
    slow: PipelineRun
    scaled: ReplicatedRun | None
    slow_conversations: int
    latency: float
    prefetch: int
    overhead: Overhead
    echo_after: Rate
    floor: Floor | None


def busy(rate: Rate) -> str:
    """How much of one core the process used: near 100% means CPU-bound."""
    return f"process busy {rate.per_second * rate.cpu_per_event * 100:.0f}% of a core"


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def scaled_rows(results: Results) -> list[tuple[str, str, str]]:
    scaled = results.scaled
    if scaled is None:
        return []
    ideal = results.prefetch / results.latency
    rate = scaled.rate
    efficiency = rate.per_second / ideal
    return [
        (
            f"(c') {scaled.replicas} replicas x prefetch {results.prefetch // scaled.replicas}, "
            "events/s",
            f"{rate.per_second:.1f}",
            f"same {results.prefetch} in flight in all; replicas' CPU "
            f"{rate.cpu_per_event * 1000:.2f} ms/event ({rate.per_second * rate.cpu_per_event:.2f} "
            "cores)",
        ),
        (
            "(c') efficiency",
            f"{efficiency:.3f}",
            f"target >= {TARGET_EFFICIENCY}: {verdict(efficiency >= TARGET_EFFICIENCY)}",
        ),
    ]


def floor_rows(
    floor: Floor | None, echo_cpu: float, pipeline_cpu: float
) -> list[tuple[str, str, str]]:
    if floor is None:
        return []
    ms = 1000.0
    rows = [
        (f"(f) {name}", f"{value:.3f} ms", "CPU per event, alone")
        for name, value in floor.alone.items()
    ]
    bound = echo_cpu / (echo_cpu + floor.together / ms)
    rows += [
        ("(f) sum of the parts alone", f"{floor.total:.3f} ms", "CPU per event"),
        (
            "(f) all parts together per event",
            f"{floor.together:.3f} ms",
            f"CPU per event, 32 in flight; (b) spends {pipeline_cpu * ms - floor.together:.2f} ms "
            "more (consuming, llm-bot's own code, pydantic, logs, metrics)",
        ),
        (
            "(b) CPU / (f) all parts together",
            f"{pipeline_cpu * ms / floor.together:.2f}",
            f"target <= {TARGET_CPU_RATIO:g}: "
            f"{verdict(pipeline_cpu * ms <= TARGET_CPU_RATIO * floor.together)}",
        ),
        (
            "(f) bound on (b)/(a) with these libraries",
            f"{bound:.3f}",
            "echo CPU / (echo CPU + all parts together): (b)/(a) at zero llm-bot cost",
        ),
        (
            "(f) all parts but the graph run, together",
            f"{floor.together_but_graph:.3f} ms",
            "CPU per event: what remains if many events shared one LangGraph run",
        ),
        (
            "(f) bound on (b)/(a) with the graph run shared",
            f"{echo_cpu / (echo_cpu + floor.together_but_graph / ms):.3f}",
            "echo CPU / (echo CPU + all parts but the graph)",
        ),
    ]
    return rows


def retrieval_rows(results: Results) -> list[tuple[str, str, str]]:
    """Searches that timed out in each phase, against the target share."""
    phases = (
        ("(b)", results.instant.retrieval),
        ("(c)", results.slow.retrieval),
        ("(d)", results.overhead.retrieval),
    )
    rows = []
    for phase, outcomes in phases:
        if outcomes is None:
            continue
        total, timed_out = outcomes.searches.total(), outcomes.searches["timeout"]
        ok = timed_out <= TARGET_TIMEOUT_SHARE * total
        rows.append(
            (
                f"{phase} recall searches timed out",
                f"{timed_out} / {total}",
                f"target <= {TARGET_TIMEOUT_SHARE:.1%}: {verdict(ok)}; {outcomes.summary()}",
            )
        )
    return rows


def report(results: Results, args: argparse.Namespace) -> str:
    echo = (results.echo.per_second + results.echo_after.per_second) / 2
    echo_cpu = (results.echo.cpu_per_event + results.echo_after.cpu_per_event) / 2
    b = results.instant.rate.per_second
    c = results.slow.rate.per_second
    ideal = results.prefetch / results.latency
    ratio, efficiency = b / echo, c / ideal
    redis = results.instant.redis
    assert redis is not None
    ms = 1000.0
    o = results.overhead
    isolated = o.redis_commands
    isolated_total = isolated.total() / o.events
    isolated_lua = sum(v for k, v in isolated.items() if k.startswith("lua:")) / o.events
    rows = [
        (
            "(a) echo baseline, events/s",
            f"{results.echo.per_second:.0f}",
            f"CPU {results.echo.cpu_per_event * ms:.2f} ms/event (this process)",
        ),
        (
            "(a') echo baseline again after (b)-(d), events/s",
            f"{results.echo_after.per_second:.0f}",
            f"CPU {results.echo_after.cpu_per_event * ms:.2f} ms/event; mean of (a), (a') "
            f"{echo:.0f} used below",
        ),
        (
            "(b) pipeline, instant model, events/s",
            f"{b:.1f}",
            f"CPU {results.instant.rate.cpu_per_event * ms:.2f} ms/event (service and "
            f"collector): {busy(results.instant.rate)}",
        ),
        (
            "(b)/(a)",
            f"{ratio:.3f}",
            f"target >= {TARGET_RATIO}: {verdict(ratio >= TARGET_RATIO)}; CPU per event "
            f"(a)/(b): {echo_cpu / results.instant.rate.cpu_per_event:.3f}",
        ),
        (
            f"(c) pipeline, {results.latency * ms:.0f} ms model, events/s",
            f"{c:.1f}",
            f"ideal {results.prefetch} / {results.latency:g} s = {ideal:.0f}; CPU "
            f"{results.slow.rate.cpu_per_event * ms:.2f} ms/event: {busy(results.slow.rate)}",
        ),
        (
            "(c) efficiency",
            f"{efficiency:.3f}",
            f"target >= {TARGET_EFFICIENCY}: {verdict(efficiency >= TARGET_EFFICIENCY)}",
        ),
        *scaled_rows(results),
        (
            "(d) end to end per event p50 / p99",
            f"{statistics.median(o.end_to_end) * ms:.1f} / {percentile(o.end_to_end, 0.99) * ms:.1f} ms",
            "publish -> candidate received",
        ),
        (
            "(d) model span p50 / p99",
            f"{statistics.median(o.model) * ms:.1f} / {percentile(o.model, 0.99) * ms:.1f} ms",
            "openai SDK call to the fake (HTTP included)",
        ),
        (
            "(d) overhead outside the model p50 / p99",
            f"{statistics.median(o.overhead) * ms:.1f} / {percentile(o.overhead, 0.99) * ms:.1f} ms",
            "end to end - model span, per event",
        ),
        (
            "(d) of which in the service p50 / p99",
            f"{statistics.median(o.in_service) * ms:.1f} / {percentile(o.in_service, 0.99) * ms:.1f} ms",
            "consumer span (delivery -> acked) - model span",
        ),
        *floor_rows(results.floor, echo_cpu, results.instant.rate.cpu_per_event),
        (
            "(e) Redis commands per event, server-wide",
            f"{redis.server_commands:.2f}",
            "INFO commandstats delta over (b), scripts' inner commands included",
        ),
        (
            "(e) Redis commands per event, this bench's keys",
            f"{isolated_total:.2f}",
            f"MONITOR during (d), filtered by key prefix; {isolated_lua:.2f} inside scripts",
        ),
        (
            "(e) Redis commands per event sent by the client",
            f"{redis.client_commands:.2f}",
            "over (b); pipelined commands one by one, EVALSHA as one",
        ),
        (
            "(e) Redis round trips per event",
            f"{redis.round_trips:.2f}",
            f"target <= {TARGET_ROUND_TRIPS:g}: {verdict(redis.round_trips <= TARGET_ROUND_TRIPS)}",
        ),
        *retrieval_rows(results),
    ]
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    lines = [
        f"llm-bot throughput, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, prefetch {results.prefetch}, "
        f"log level {args.log_level}",
        f"(a) {results.echo.events} events; (b) {results.instant.rate.events} events over "
        f"{args.conversations} conversations; (c) {results.slow.rate.events} events over "
        f"{results.slow_conversations} conversations; (d) {o.events} events at {o.rate:g}/s "
        f"over {args.conversations} conversations",
        "",
        f"{'measure':<{width}}  {'value':>{value_width}}  note",
        f"{'-' * width}  {'-' * value_width}  {'-' * 40}",
    ]
    lines += [f"{name:<{width}}  {value:>{value_width}}  {note}" for name, value, note in rows]
    lines += [
        "",
        "Redis per event, server (INFO commandstats): "
        + ", ".join(f"{k} {v:.2f}" for k, v in redis.server_breakdown.items()),
        "Redis per event, this bench's keys (MONITOR, lua: = inside a script): "
        + ", ".join(f"{k} {v / o.events:.2f}" for k, v in isolated.most_common()),
        "Redis per event, client (redis-py, top level): "
        + ", ".join(f"{k} {v:.2f}" for k, v in redis.client_breakdown.items())
        + f"; inside scripts: {redis.script_internal:.2f}",
        "",
        "Method: (a)-(c') fill the queue first, then time first -> last reply received. "
        "(d) publishes at a steady rate; model time is the service's own 'chat' "
        "client span, so the openai SDK and HTTP to the fake count as model time. "
        "(e) round trips = socket writes by redis-py over (b) (a pipeline or an EVALSHA = 1, "
        "connection setup included); commandstats is server-wide (other clients of this "
        "Redis inflate it), so commands are also counted by MONITOR on this session's key "
        "prefix, where commands run inside scripts are tagged lua.",
    ]
    problems = [
        *(f"(b) {p}" for p in results.instant.problems),
        *(f"(c) {p}" for p in results.slow.problems),
        *(f"(c') {p}" for p in (results.scaled.problems if results.scaled else [])),
        *(f"(d) {p}" for p in results.overhead.problems),
    ]
    lines += ["", "PROBLEMS: " + "; ".join(problems)] if problems else []
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


async def remove_keys(redis_url: str) -> int:
    client = aioredis.from_url(redis_url)
    removed = 0
    try:
        batch: list[bytes] = []
        async for name in client.scan_iter(match=f"{TEST_KEY_PREFIX}:*", count=1000):
            batch.append(name)
            if len(batch) >= 500:
                removed += int(await client.unlink(*batch))
                batch.clear()
        if batch:
            removed += int(await client.unlink(*batch))
    finally:
        await client.aclose()
    return removed


def step(name: str) -> None:
    print(f"... {name}", flush=True)


async def fairness_ab(urls: ServiceUrls, args: argparse.Namespace) -> None:
    """(b) with fair dispatch off and on, alternating; CPU per event of each."""
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(args.fairness_ab):
        for fair in (False, True):
            step(f"(b) round {round_ + 1}, fair dispatch {'on' if fair else 'off'}")
            result = await pipeline(
                urls,
                events=args.events,
                conversations=args.conversations,
                latency=0.0,
                prefetch=args.prefetch,
                count_redis=False,
                fake_in_process=args.fake_in_process,
                fair_dispatch=fair,
                embeddings="off",  # the reply path alone: retrieval's CPU is noise here
            )
            cpu[fair].append(result.rate.cpu_per_event * 1000)
            print(
                f"    {result.rate.per_second:.1f} events/s, "
                f"{result.rate.cpu_per_event * 1000:.2f} ms CPU/event "
                f"{'; '.join(result.problems)}"
            )
    off, on = statistics.median(cpu[False]), statistics.median(cpu[True])
    print(
        f"fair dispatch off: {' '.join(f'{v:.2f}' for v in cpu[False])} ms CPU/event "
        f"(median {off:.2f}); on: {' '.join(f'{v:.2f}' for v in cpu[True])} "
        f"(median {on:.2f}); added {on - off:+.2f} ms/event ({on / off:.2f}x)"
    )


async def redis_cluster_ab(urls: ServiceUrls, args: argparse.Namespace) -> None:
    """(b) on the single Redis and on a 3-master, 3-replica Redis Cluster of this bench's
    own (``tests/support/redis_cluster.py``), alternating: events/s, CPU and redis-py round
    trips, commands and bytes per event of each."""
    with redis_cluster() as nodes:
        targets = {"single": urls, "cluster": replace(urls, redis_url=nodes.url)}
        await _alternating("Redis", targets, args, count_redis=True)


async def rabbit_cluster_ab(urls: ServiceUrls, args: argparse.Namespace) -> None:
    """(b) on the single RabbitMQ at ``AMQP_URL`` and on a 3-node RabbitMQ cluster of this
    bench's own (``tests/support/rabbit_cluster.py``; ``AMQP_URL`` lists its nodes),
    alternating: events/s and CPU per event of each."""
    with rabbit_cluster() as nodes:
        targets = {"single": urls, "cluster": replace(urls, amqp_url=nodes.url)}
        await _alternating("RabbitMQ", targets, args, count_redis=False)


async def _alternating(
    label: str, targets: dict[str, ServiceUrls], args: argparse.Namespace, *, count_redis: bool
) -> None:
    """(b) through each target in turn, ``--redis-cluster`` / ``--rabbit-cluster`` rounds,
    embeddings off (the reply path: the embedding's CPU would hide it); each run's figures,
    then the medians per target."""
    rounds = args.redis_cluster if label == "Redis" else args.rabbit_cluster
    figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in targets}
    for round_ in range(rounds):
        for name, target in targets.items():
            step(f"(b) round {round_ + 1}, {label} {name}")
            result = await pipeline(
                target,
                events=args.events,
                conversations=args.conversations,
                latency=0.0,
                prefetch=args.prefetch,
                count_redis=count_redis,
                fake_in_process=args.fake_in_process,
                embeddings="off",
            )
            row: tuple[float, ...] = (result.rate.per_second, result.rate.cpu_per_event * 1000)
            if result.redis is not None:
                redis = result.redis
                row += (redis.round_trips, redis.client_commands, redis.bytes_sent)
            figures[name].append(row)
            print(f"    {_figures(row)} {'; '.join(result.problems)}")
    for name, rows in figures.items():
        medians = tuple(statistics.median(column) for column in zip(*rows, strict=True))
        print(f"{label} {name}, medians: {_figures(medians)}")


def _figures(row: tuple[float, ...]) -> str:
    text = f"{row[0]:.1f} events/s, {row[1]:.2f} ms CPU/event"
    if len(row) == 5:
        trips, commands, sent = row[2:]
        text += (
            f", {trips:.2f} redis-py round trips, {commands:.1f} commands and {sent:.0f} "
            "bytes sent per event"
        )
    return text


async def run(args: argparse.Namespace) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    slow_conversations = max(args.prefetch, args.latency_conversations)
    user = new_id("u")
    try:
        if args.fairness_ab:
            await fairness_ab(urls, args)
            return
        if args.redis_cluster:
            await redis_cluster_ab(urls, args)
            return
        if args.rabbit_cluster:
            await rabbit_cluster_ab(urls, args)
            return
        if args.index_entries:
            step(f"the bench user's index: {args.index_entries} messages")
            seconds = await fill_index(
                urls.redis_url,
                TEST_KEY_PREFIX,
                user,
                args.index_entries,
                model=args.embedding_model,
            )
            print(f"    written in {seconds:.1f} s")
        if args.only_b:
            step(f"(b) pipeline only, instant model, {args.events} events")
            alone = await pipeline(
                urls,
                events=args.events,
                conversations=args.conversations,
                latency=0.0,
                prefetch=args.prefetch,
                count_redis=False,
                fake_in_process=args.fake_in_process,
                user=user,
                embedding_model=args.embedding_model,
            )
            print(
                f"(b) {alone.rate.per_second:.1f} events/s, "
                f"{alone.rate.cpu_per_event * 1000:.2f} ms CPU/event {'; '.join(alone.problems)}"
            )
            if alone.retrieval is not None:
                print(f"(b) recall searches: {alone.retrieval.summary()}")
            return
        step(f"(a) echo baseline, {args.echo_events} events")
        echo = await echo_baseline(urls.amqp_url, args.echo_events, args.prefetch)
        step(f"(b)+(e) pipeline, instant model, {args.events} events")
        instant = await pipeline(
            urls,
            events=args.events,
            conversations=args.conversations,
            latency=0.0,
            prefetch=args.prefetch,
            count_redis=True,
            fake_in_process=args.fake_in_process,
            user=user,
            embedding_model=args.embedding_model,
        )
        step(f"(c) pipeline, {args.latency * 1000:.0f} ms model, {args.latency_events} events")
        slow = await pipeline(
            urls,
            events=args.latency_events,
            conversations=slow_conversations,
            latency=args.latency,
            prefetch=args.prefetch,
            count_redis=False,
            fake_in_process=args.fake_in_process,
            user=user,
            embedding_model=args.embedding_model,
        )
        scaled = None
        if args.replicas > 0:
            step(
                f"(c') {args.replicas} replicas x prefetch {args.prefetch // args.replicas}, "
                f"{args.latency * 1000:.0f} ms model, {args.latency_events} events"
            )
            scaled = await replicated(
                urls,
                events=args.latency_events,
                conversations=slow_conversations,
                latency=args.latency,
                prefetch=args.prefetch,
                count=args.replicas,
                log_level=args.log_level,
            )
        step(f"(d) overhead, {args.overhead_events} events at {args.overhead_rate:g}/s")
        measured = await overhead(
            urls,
            events=args.overhead_events,
            conversations=args.conversations,
            rate=args.overhead_rate,
            prefetch=args.prefetch,
            fake_in_process=args.fake_in_process,
            user=user,
            embedding_model=args.embedding_model,
        )
        floor = None
        if not args.no_floor:
            step("(f) floor: the libraries' own cost per event, alone and together")
            floor = await measure_floor(amqp_url=urls.amqp_url, redis_url=urls.redis_url)
        step("(a') echo baseline again")
        echo_after = await echo_baseline(urls.amqp_url, args.echo_events, args.prefetch)
    finally:
        await remove_keys(urls.redis_url)
    results = Results(
        echo=echo,
        instant=instant,
        slow=slow,
        scaled=scaled,
        slow_conversations=slow_conversations,
        latency=args.latency,
        prefetch=args.prefetch,
        overhead=measured,
        echo_after=echo_after,
        floor=floor,
    )
    print()
    print(report(results, args))


# --------------------------------------------------------------------------- profile
# Profile (b) from outside with py-spy (not a project dependency):
#   .venv/bin/pip install py-spy
#   .venv/bin/py-spy record -r 250 --gil --full-filenames -f raw -o /tmp/b.raw -- \
#       .venv/bin/python -m tests.bench.throughput --only-b
#   .venv/bin/python -m tests.bench.throughput --summarize /tmp/b.raw

LAYERS: dict[str, str] = {
    **dict.fromkeys(("aio_pika", "aiormq", "pamqp"), "aio-pika / aiormq / pamqp"),
    **dict.fromkeys(
        ("langgraph", "langchain_core", "langsmith", "uuid_utils", "ormsgpack", "xxhash"),
        "LangGraph + langchain_core",
    ),
    "redis": "redis-py",
    "openai": "openai SDK (request building, response parsing)",
    **dict.fromkeys(
        ("httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio", "sniffio", "jiter"),
        "httpx / httpcore / anyio (model HTTP client)",
    ),
    **dict.fromkeys(
        ("pydantic", "pydantic_core", "typing_extensions", "typing_inspection"), "pydantic"
    ),
    "structlog": "structlog",
    **dict.fromkeys(("tiktoken", "regex"), "tiktoken"),
    "opentelemetry": "OpenTelemetry",
    "prometheus_client": "prometheus_client",
    **dict.fromkeys(
        ("aiohttp", "multidict", "yarl", "propcache", "frozenlist", "aiosignal"),
        "aiohttp (the model HTTP client's transport; and the fake with --fake-in-process)",
    ),
    "fake_model": "fake model server (only with --fake-in-process)",
    "tests": "bench + harness (collecting candidates)",
}
SETUP_MARKERS = ("_find_and_load", "prefill", "declare_topology", "FakeModelServer.start")
Frame = tuple[str, str]


def _owner(path: str) -> str | None:
    """The third-party package or llm_bot subpackage of a file; None for the stdlib."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/llm_bot/" in path:
        sub = path.split("/llm_bot/", 1)[1].split("/", 1)[0].removesuffix(".py")
        return sub if sub == "fake_model" else f"llm_bot.{sub}"
    if "/tests/" in path:
        return "tests"
    return None


def _stack(line: str) -> tuple[list[Frame], int]:
    """One py-spy ``raw`` (collapsed) line: frames root first, and its sample count."""
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    frames = []
    for frame in stack.split(";"):
        name, _, where = frame.rpartition(" (")
        frames.append((name, where.rsplit(":", 1)[0]))
    return frames, int(count)


# Inclusive groups: a sample counts in every group one of its frames matches.
MARKERS: tuple[tuple[str, Callable[[str, str], bool]], ...] = (
    ("parse_event (InternalEventV2 validation)", lambda f, p: f == "parse_event"),
    ("graph nodes, own code and what they call", lambda f, p: p.endswith("graph/builder.py")),
    ("  recall: RedisMemoryStore.load", lambda f, p: f.endswith("RedisMemoryStore.load")),
    ("  call_model: assemble_context", lambda f, p: f == "assemble_context"),
    ("    of which tiktoken", lambda f, p: "/tiktoken/" in p),
    ("  call_model: OpenAIChatModel.complete", lambda f, p: f.endswith("OpenAIChatModel.complete")),
    ("  remember: RedisMemoryStore.commit", lambda f, p: f.endswith("RedisMemoryStore.commit")),
    ("lease acquire + release", lambda f, p: f.endswith("RedisConversationLease.hold")),
    ("publish candidate + memory job, ack (_act)", lambda f, p: f.endswith("EventConsumer._act")),
    (
        "LangGraph sync branch functions in threads",
        lambda f, p: f in ("_after_ingest", "_after_recall"),
    ),
    ("JSON: stdlib json", lambda f, p: "/json/" in p),
    ("JSON: pydantic *_json", lambda f, p: f.endswith(("model_validate_json", "model_dump_json"))),
    ("structlog", lambda f, p: "/structlog/" in p),
    ("OpenTelemetry", lambda f, p: "/opentelemetry/" in p),
)


def summarize(raw: str) -> str:
    """CPU shares from py-spy raw output: by layer (each sample to its innermost
    non-stdlib frame; stdlib time such as ``json`` goes to its caller) and inclusive groups.
    Start-up (imports, filling the queue) is left out."""
    layers: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    functions: Counter[Frame] = Counter()
    setup = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        frames, count = _stack(line)
        if any(any(m in f for m in SETUP_MARKERS) for f, _ in frames):
            setup += count
            continue
        loop = [(f, p) for f, p in frames if not f.startswith(("main", "<module>"))]
        inner = next(((f, p) for f, p in reversed(loop) if _owner(p)), None)
        owner = _owner(inner[1]) if inner else None
        layer = "asyncio event loop, sockets, threads (stdlib)"
        if owner is not None:
            layer = LAYERS.get(owner, owner if owner.startswith("llm_bot") else f"other: {owner}")
        layers[layer] += count
        if inner is not None:
            functions[(inner[0], inner[1].rsplit("site-packages/", 1)[-1])] += count
        for name, marker in MARKERS:
            if any(marker(f, p) for f, p in frames):
                groups[name] += count
    total = layers.total()
    lines = [f"{total} samples while processing ({setup} more in start-up, left out)", ""]
    lines.append("by layer (innermost non-stdlib frame), % of samples:")
    lines += [f"  {n / total * 100:5.1f}%  {name}" for name, n in layers.most_common()]
    lines += ["", "inclusive groups, % of samples:"]
    lines += [f"  {groups[name] / total * 100:5.1f}%  {name}" for name, _ in MARKERS]
    lines += ["", "top functions (innermost non-stdlib frame), % of samples:"]
    lines += [
        f"  {n / total * 100:5.1f}%  {name} ({path})"
        for (name, path), n in functions.most_common(25)
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--echo-events", type=int, default=4000, help="(a)")
    parser.add_argument("--events", type=int, default=2000, help="(b)")
    parser.add_argument("--conversations", type=int, default=100, help="(b) and (d)")
    parser.add_argument("--latency", type=float, default=0.2, help="(c) model latency, s")
    parser.add_argument("--latency-events", type=int, default=640, help="(c)")
    parser.add_argument("--latency-conversations", type=int, default=64, help="(c), >= prefetch")
    parser.add_argument("--overhead-events", type=int, default=600, help="(d)")
    parser.add_argument("--overhead-rate", type=float, default=40.0, help="(d) events/s")
    parser.add_argument("--prefetch", type=int, default=32)
    parser.add_argument(
        "--embedding-model",
        default=None,
        help="(b)-(d): LLM_BOT_EMBEDDING_MODEL for the service and the user's index (default: "
        "the service's default)",
    )
    parser.add_argument(
        "--index-entries",
        type=int,
        default=1000,
        help="(b)-(d): messages in the bench user's index before the run (0: an empty index)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="(c') llm-bot run processes sharing the prefetch budget; 0 skips (c')",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip (f)")
    parser.add_argument(
        "--fake-in-process",
        action="store_true",
        help="run the fake model in this process and event loop, not in its own process",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop for the whole run (uvloop: pip install uvloop first; not a dependency)",
    )
    parser.add_argument(
        "--log-level", default="warning", choices=("debug", "info", "warning", "error")
    )
    parser.add_argument(
        "--only-b",
        action="store_true",
        help="only run (b) (to profile it from outside: py-spy record -- <this command>)",
    )
    parser.add_argument(
        "--summarize", metavar="RAW", help="summarize a py-spy raw profile of --only-b; no run"
    )
    parser.add_argument(
        "--fairness-ab",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only (b), ROUNDS times with fair dispatch off then on: its cost per event",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only (b), ROUNDS times on the single Redis then on a Redis Cluster of its own",
    )
    parser.add_argument(
        "--rabbit-cluster",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only (b), ROUNDS times on the single RabbitMQ then on a 3-node cluster of its own",
    )
    args = parser.parse_args()
    if args.summarize:
        print(summarize(Path(args.summarize).read_text(encoding="utf-8")))
        return
    # As `llm-bot run` does (JSON lines on stderr); the harness itself configures nothing.
    configure_logging(level=args.log_level, fmt="json")
    # One loop for every phase, (a) and (b) alike.
    if args.loop == "uvloop":
        import uvloop  # noqa: PLC0415  # optional, for the A/B in docs/benchmarks-notebook.md

        uvloop.run(run(args))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
