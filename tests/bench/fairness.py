"""Fair dispatch under a noisy neighbour: a quiet tenant's time to candidate while another
tenant bursts one conversation or floods many.

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.fairness                  # fair and before, side by side
    .venv/bin/python -m tests.bench.fairness --seconds 10 --no-baseline
    .venv/bin/python -m tests.bench.fairness --kill           # + SIGKILL a replica mid-flood

Each scenario runs against two ``llm-bot run`` replicas (prefetch ``--prefetch`` each, the
production 32 by default; embeddings off) with the fake model in its own process answering
after ``--latency`` seconds. The quiet tenant chats at ``--rate`` messages/s round-robin
over ``--quiet-conversations`` conversations (so each conversation's turns stay in order)
for ``--seconds`` seconds, and on until the noisy tenant's work is answered:

- ``alone``: the quiet load only;
- ``burst``: another tenant's ONE conversation gets ``--burst`` events published at once at
  the start: every one must be answered, none dead-lettered, its candidates' turns 1..N;
- ``flood``: another tenant publishes ``--flood`` events over ``--flood-conversations``
  conversations at once: every one must be answered (one candidate id per event).

Each scenario runs with ``LLM_BOT_FAIR_DISPATCH=true`` ("fair") and, unless
``--no-baseline``, with ``false`` ("before"), each on fresh queues and conversations. The
quiet tenant's p50/p99/max publish-to-candidate times are printed with how long the noisy
work took to drain. Done-when targets (fair mode): burst quiet p99 <= 2 x alone p99 +
100 ms, flood quiet p99 <= 2 x alone p99 + 250 ms. Exit code 0 when the fair mode meets
both and its correctness checks hold (everything answered, nothing dead-lettered, burst
turns 1..N, no event with two candidate ids), else 1.

``--kill``: in the fair flood, SIGKILL one replica at about half of the flood answered and
start a replacement; the flood must still end with exactly one candidate id per event
(duplicate deliveries of the same candidate id are counted and reported). Conversations the
victim held wait for their lease to lapse (``--lease-seconds``), so with ``--kill`` the
flood's latency target is printed for information only.

Diagnostics printed beside the figures, to tell where a quiet message's time went: the
ingress queue's depth (sampled every 0.2 s: its peak, when it was empty again, and the quiet
latencies of the messages published after that), the replicas' CPU in cores and the
machine's busy share, the replicas' ``llmbot_events_waited`` by reason, and the quiet
tenant's slowest messages. ``--scenarios`` runs a subset; ``--log-level info`` keeps the
replicas' event logs.

Its queues and Redis keys (this run's key prefix) are deleted at the end; the replicas'
logs stay in the temp dirs printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import aiohttp

from llm_bot.config import Settings
from tests.bench.processes import cpu_seconds, fake_model_process, replicas
from tests.bench.soak import log_summary
from tests.bench.throughput import remove_keys
from tests.support.events import message_event, new_id
from tests.support.harness import TEST_KEY_PREFIX, Integrator, integrator, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

QUIET = "fair-quiet"
NOISY = "fair-noisy"
SCENARIOS = ("alone", "burst", "flood")
TARGET_SLACK_MS = {"burst": 100.0, "flood": 250.0}
"""Target: the scenario's quiet p99 <= 2 x the same mode's alone p99 + this."""
QUIET_TAIL_SECONDS = 60.0
"""How long the quiet tenant's last messages may take once its load stops."""


def percentile(values: list[float], q: float) -> float:
    """Nearest rank (as ``throughput.py``); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@dataclass
class Outcome:
    """What one scenario in one mode measured."""

    mode: str
    scenario: str
    quiet_ms: list[float]
    quiet_sent: int
    noisy_expected: int = 0
    noisy_answered: int = 0
    noisy_dead: int = 0
    drain_seconds: float | None = None
    turns_ok: bool | None = None
    turns_note: str = ""
    deliveries: int = 0
    duplicate_deliveries: int = 0
    two_ids: int = 0
    quiet_dead: int = 0
    dlq_depth: int = 0
    timed_out: bool = False
    killed: list[str] = field(default_factory=list)
    ingress_peak: int = 0
    ingress_empty_at: float | None = None
    """Seconds from the noisy publish to the ingress queue's first empty sample after it."""
    replica_cores: float = 0.0
    """The replicas' CPU (user + system) over the run's wall time, in cores."""
    machine_busy: float = 0.0
    """The machine's busy share of all its CPUs over the run (``/proc/stat``)."""
    settled_ms: list[float] = field(default_factory=list)
    """Quiet latencies of the messages published after the ingress queue was empty again
    and before the noisy work drained: the fair queue's share, without RabbitMQ's FIFO."""
    slowest: list[str] = field(default_factory=list)
    """The quiet tenant's slowest messages: latency, when published, conversation."""
    waited: Counter[str] = field(default_factory=Counter)
    """The replicas' ``llmbot_events_waited`` by reason (fair mode), summed at the end."""
    log_dir: Path | None = None
    log_lines: Counter[str] = field(default_factory=Counter)

    @property
    def p50(self) -> float:
        return percentile(self.quiet_ms, 0.50)

    @property
    def p99(self) -> float:
        return percentile(self.quiet_ms, 0.99)

    @property
    def max(self) -> float:
        return max(self.quiet_ms, default=float("nan"))

    @property
    def quiet_lost(self) -> int:
        return self.quiet_sent - len(self.quiet_ms)

    def problems(self) -> list[str]:
        """Correctness failures (whatever the latencies)."""
        found = []
        if self.quiet_lost:
            found.append(f"{self.quiet_lost} quiet events unanswered")
        if self.quiet_dead:
            found.append(f"{self.quiet_dead} quiet events dead-lettered")
        if self.noisy_answered < self.noisy_expected:
            found.append(f"noisy answered {self.noisy_answered}/{self.noisy_expected}")
        if self.noisy_dead:
            found.append(f"{self.noisy_dead} noisy events dead-lettered")
        if self.turns_ok is False:
            found.append(f"burst turns not 1..N ({self.turns_note})")
        if self.two_ids:
            found.append(f"{self.two_ids} events with two candidate ids")
        if self.timed_out:
            found.append("timed out")
        return found


class Run:
    """One scenario in one mode: publishes, collects, times."""

    def __init__(self, args: argparse.Namespace, settings: Settings, scenario: str) -> None:
        self.args, self.settings, self.scenario = args, settings, scenario
        self.quiet_convs = [(new_id("u"), new_id("c")) for _ in range(args.quiet_conversations)]
        self.noisy = self.noisy_events()
        self.noisy_ids = {str(e["id"]) for e in self.noisy}
        self.sent_at: dict[str, float] = {}
        """Quiet event id -> when its publish started."""
        self.conv_of: dict[str, str] = {}
        """Quiet event id -> its conversation."""
        self.started = 0.0
        self.first_at: dict[str, float] = {}
        """Event id -> when its first candidate arrived."""
        self.ids_of: dict[str, set[str]] = defaultdict(set)
        """Event id -> candidate ids received for it."""
        self.deliveries: Counter[str] = Counter()
        """Candidate id -> times received."""
        self.turn_of: dict[str, int] = {}
        """Candidate id -> its turn (noisy tenant; -1 when it has none)."""
        self.dead: dict[str, set[str]] = defaultdict(set)
        """Tenant -> event ids of the error events received."""
        self.noisy_started = 0.0
        self.killed: list[str] = []
        self.ingress: list[tuple[float, int]] = []
        """(time, ready messages in the ingress queue), sampled during the run."""
        self.cpu: dict[int, tuple[float, float]] = {}
        """Replica pid -> (first, last) CPU seconds sampled."""
        self.machine: list[tuple[int, int]] = []
        """(busy, total) jiffies of the machine at the run's start and end."""
        self.wall = 0.0

    def noisy_events(self) -> list[dict[str, Any]]:
        if self.scenario == "burst":
            user, conv = new_id("u"), new_id("c")
            return [
                message_event(tenant=NOISY, user=user, conversation=conv, text=f"burst {i}")
                for i in range(self.args.burst)
            ]
        if self.scenario == "flood":
            convs = [(new_id("u"), new_id("c")) for _ in range(self.args.flood_conversations)]
            return [
                message_event(
                    tenant=NOISY, user=convs[i % len(convs)][0],
                    conversation=convs[i % len(convs)][1], text=f"flood {i}",
                )
                for i in range(self.args.flood)
            ]  # fmt: skip
        return []

    @property
    def noisy_answered(self) -> int:
        return sum(1 for i in self.noisy_ids if i in self.first_at)

    def noisy_settled(self) -> bool:
        """Every noisy event answered or dead-lettered."""
        return all(i in self.first_at or i in self.dead[NOISY] for i in self.noisy_ids)

    async def collect(self, client: Integrator) -> None:
        while True:
            candidate = await client.candidates.get()
            now = time.perf_counter()
            body = candidate.body
            event_id, candidate_id = str(body["event_id"]), str(body["id"])
            self.first_at.setdefault(event_id, now)
            self.ids_of[event_id].add(candidate_id)
            self.deliveries[candidate_id] += 1
            if body.get("tenant_id") == NOISY:
                self.turn_of[candidate_id] = int(body.get("turn") or -1)

    async def collect_errors(self, client: Integrator) -> None:
        while True:
            error = await client.errors.get()
            self.dead[str(error.body.get("tenant_id"))].add(str(error.body.get("event_id")))

    async def quiet_load(self, client: Integrator, stop: asyncio.Event) -> None:
        """``--rate`` messages/s round-robin over the quiet conversations until ``stop``."""
        started = time.perf_counter()
        sent = 0
        while not stop.is_set():
            user, conv = self.quiet_convs[sent % len(self.quiet_convs)]
            event = message_event(tenant=QUIET, user=user, conversation=conv, text=f"q {sent}")
            self.sent_at[str(event["id"])] = time.perf_counter()
            self.conv_of[str(event["id"])] = conv
            await client.publish(event)
            sent += 1
            wake = started + sent / self.args.rate
            await asyncio.sleep(max(0.0, wake - time.perf_counter()))

    async def noisy_load(self, publisher: Integrator) -> None:
        """All at once: one ordered publish stream per noisy conversation."""
        streams: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in self.noisy:
            streams[event["conversation_id"]].append(event)

        async def stream(events: list[dict[str, Any]]) -> None:
            for event in events:
                await publisher.publish(event)

        self.noisy_started = time.perf_counter()
        await asyncio.gather(*(stream(events) for events in streams.values()))

    async def sample(self, client: Integrator, procs: list[ConsumerProcess]) -> None:
        """The ingress queue's depth and the replicas' CPU, every 0.2 s."""
        while True:
            with contextlib.suppress(Exception):  # a sample missed is no harm
                depth = await client.ingress_depth()
                self.ingress.append((time.perf_counter(), depth))
            for proc in procs:
                if proc.process is None or proc.process.returncode is not None:
                    continue
                with contextlib.suppress(OSError, IndexError, ValueError):  # just exited
                    used = cpu_seconds(proc.process.pid)
                    first = self.cpu.get(proc.process.pid, (used, used))[0]
                    self.cpu[proc.process.pid] = (first, used)
            await asyncio.sleep(0.2)

    async def kill_at_half(self, procs: list[ConsumerProcess]) -> None:
        while self.noisy_answered < len(self.noisy_ids) / 2:
            await asyncio.sleep(0.02)
        victim = procs[0]
        victim.kill()
        assert victim.process is not None  # started by replicas()
        await victim.process.wait()
        self.killed.append(
            f"SIGKILL {victim.log_path.name} at {self.noisy_answered}/{len(self.noisy_ids)} "
            f"answered, t={time.perf_counter() - self.noisy_started:.1f}s"
        )
        print(f"      {self.killed[-1]}", flush=True)
        replacement = ConsumerProcess(
            self.settings, log_path=victim.log_path.parent / f"replica{len(procs)}.log"
        )
        procs.append(replacement)  # replicas() stops it with the others
        await replacement.start()
        await replacement.wait_ready(within=60)
        self.killed.append(
            f"replacement {replacement.log_path.name} ready, "
            f"t={time.perf_counter() - self.noisy_started:.1f}s"
        )
        print(f"      {self.killed[-1]}", flush=True)

    async def drive(
        self, client: Integrator, publisher: Integrator, procs: list[ConsumerProcess], kill: bool
    ) -> bool:
        """The quiet load for ``--seconds`` and until the noisy work settled (or
        ``--timeout``), then the quiet tail; True when it timed out."""
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.collect(client)),
            asyncio.create_task(self.collect_errors(client)),
            asyncio.create_task(self.quiet_load(client, stop)),
            asyncio.create_task(self.sample(client, procs)),
        ]
        if self.noisy:
            tasks.append(asyncio.create_task(self.noisy_load(publisher)))
        if kill:
            tasks.append(asyncio.create_task(self.kill_at_half(procs)))
        started = self.started = time.perf_counter()
        self.machine.append(machine_jiffies())
        timed_out = False
        try:
            while True:
                await asyncio.sleep(0.05)
                for task in tasks:
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                elapsed = time.perf_counter() - started
                if elapsed >= self.args.seconds and self.noisy_settled():
                    break
                if elapsed >= self.args.seconds + self.args.timeout:
                    timed_out = True
                    break
            stop.set()
            self.wall = time.perf_counter() - started
            self.machine.append(machine_jiffies())
            deadline = time.perf_counter() + QUIET_TAIL_SECONDS
            while time.perf_counter() < deadline and not all(
                i in self.first_at or i in self.dead[QUIET] for i in self.sent_at
            ):
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # late duplicates and error events
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return timed_out

    def outcome(self, mode: str, timed_out: bool) -> Outcome:
        quiet_ms = [
            (self.first_at[i] - sent) * 1000
            for i, sent in self.sent_at.items()
            if i in self.first_at
        ]
        result = Outcome(
            mode=mode, scenario=self.scenario, quiet_ms=quiet_ms, quiet_sent=len(self.sent_at),
            quiet_dead=len(self.dead[QUIET]), timed_out=timed_out, killed=self.killed,
        )  # fmt: skip
        result.replica_cores = sum(b - a for a, b in self.cpu.values()) / max(self.wall, 1e-9)
        if len(self.machine) == 2:
            (busy0, total0), (busy1, total1) = self.machine
            result.machine_busy = (busy1 - busy0) / max(1, total1 - total0)
        result.ingress_peak = max((d for _, d in self.ingress), default=0)
        slow = sorted(
            (
                (self.first_at.get(i, float("inf")) - sent, sent, i)
                for i, sent in self.sent_at.items()
            ),
            reverse=True,
        )[:5]
        result.slowest = [
            f"{ms * 1000:.0f} ms, published at t={sent - self.started:.1f}s, {self.conv_of[i]}"
            for ms, sent, i in slow
        ]
        if not self.noisy:
            return result
        answered = [self.first_at[i] for i in self.noisy_ids if i in self.first_at]
        noisy_candidates = {c for i in self.noisy_ids for c in self.ids_of.get(i, ())}
        result.noisy_expected = len(self.noisy_ids)
        result.noisy_answered = len(answered)
        result.noisy_dead = len(self.dead[NOISY] & self.noisy_ids)
        result.drain_seconds = max(answered) - self.noisy_started if answered else None
        peak_at = next((t for t, d in self.ingress if d == result.ingress_peak), 0.0)
        result.ingress_empty_at = next(
            (t - self.noisy_started for t, d in self.ingress if t > peak_at and d == 0), None
        )
        if result.ingress_peak == 0:
            result.ingress_empty_at = None
        if result.ingress_empty_at is not None and answered:
            since = self.noisy_started + result.ingress_empty_at
            result.settled_ms = [
                (self.first_at[i] - sent) * 1000
                for i, sent in self.sent_at.items()
                if since <= sent <= max(answered) and i in self.first_at
            ]
        result.deliveries = sum(self.deliveries[c] for c in noisy_candidates)
        result.duplicate_deliveries = result.deliveries - len(noisy_candidates)
        result.two_ids = sum(1 for i in self.noisy_ids if len(self.ids_of.get(i, ())) > 1)
        if self.scenario == "burst":
            turns = Counter(self.turn_of.get(c, -1) for c in noisy_candidates)
            expected = Counter(range(1, len(self.noisy_ids) + 1))
            result.turns_ok = turns == expected
            if not result.turns_ok:
                missing = sorted(set(expected) - set(turns))
                extra = sorted(set(turns) - set(expected))
                doubled = sorted(t for t, n in turns.items() if n > 1 and t in expected)
                result.turns_note = (
                    f"missing {len(missing)} e.g. {missing[:5]}, extra {extra[:5]}, "
                    f"doubled {doubled[:5]}"
                )
        return result


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far (``/proc/stat``; idle and iowait idle)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])  # guest time is already in user
    return total - fields[3] - fields[4], total


async def waited(procs: list[ConsumerProcess]) -> Counter[str]:
    """``llmbot_events_waited`` by reason, summed over the live replicas' ``/metrics``."""
    found: Counter[str] = Counter()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for proc in procs:
            if proc.process is None or proc.process.returncode is not None:
                continue
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                url = f"http://127.0.0.1:{proc.http_port}/metrics"
                async with session.get(url) as response:
                    text = await response.text()
                for line in text.splitlines():
                    if line.startswith("llmbot_events_waited_total{"):
                        reason = line.split('reason="', 1)[1].split('"', 1)[0]
                        found[reason] += round(float(line.rsplit(" ", 1)[1]))
    return found


@contextlib.asynccontextmanager
async def noisy_publisher(settings: Settings) -> AsyncIterator[Integrator]:
    """A connection of its own for the noisy tenant's publishes (no capture queues), so its
    flood does not queue in front of the quiet tenant's publishes on one socket."""
    connection = await aio_pika.connect_robust(settings.amqp_url.get_secret_value())
    try:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(
            settings.ingress_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        yield Integrator(
            settings=settings, connection=connection, channel=channel, exchange=exchange
        )
    finally:
        await connection.close()


async def dead_lettered(client: Integrator) -> Counter[str]:
    """The DLQ's messages by tenant (taken off the queue)."""
    count = await client.queue_depth(client.settings.dlq)
    messages = await client.dead_letters(count, within=30) if count else []
    tenants: Counter[str] = Counter()
    for message in messages:
        try:
            tenants[str(json.loads(message.body).get("tenant_id"))] += 1
        except ValueError:
            tenants["(unreadable)"] += 1
    return tenants


async def run_one(
    args: argparse.Namespace, urls: ServiceUrls, model_url: str, mode: str, scenario: str
) -> Outcome:
    settings = settings_for_test(
        urls, model_url, prefetch=args.prefetch, fair_dispatch=mode == "fair",
        tenant_max_in_flight=args.tenant_max_in_flight, embeddings="off",
        log_level=args.log_level,
        **({"lease_seconds": args.lease_seconds} if args.lease_seconds else {}),
    )  # fmt: skip
    run = Run(args, settings, scenario)
    kill = args.kill and mode == "fair" and scenario == "flood"
    async with (
        integrator(settings) as client,
        noisy_publisher(settings) as publisher,
        replicas(settings, 2) as procs,
    ):
        log_dir = procs[0].log_path.parent
        print(
            f"   {mode:6s} {scenario:5s}: replicas ready on {settings.ingress_queue}, logs in "
            f"{log_dir}",
            flush=True,
        )
        timed_out = await run.drive(client, publisher, procs, kill)
        dlq = await dead_lettered(client)
        reasons = await waited(procs)
    result = run.outcome(mode, timed_out)
    result.waited = reasons
    result.dlq_depth = sum(dlq.values())
    result.log_dir = log_dir
    result.log_lines = log_summary(log_dir)
    if dlq:
        print(f"      DLQ by tenant: {dict(dlq)}", flush=True)
    print(f"      {brief(result)}", flush=True)
    print(f"      {diagnostics(result)}", flush=True)
    return result


def brief(r: Outcome) -> str:
    line = (
        f"quiet p50 {r.p50:.0f} ms p99 {r.p99:.0f} ms max {r.max:.0f} ms "
        f"n={len(r.quiet_ms)}/{r.quiet_sent}"
    )
    if r.noisy_expected:
        drain = "-" if r.drain_seconds is None else f"{r.drain_seconds:.1f}s"
        line += f"; noisy {r.noisy_answered}/{r.noisy_expected} answered, drained in {drain}"
    return line


def diagnostics(r: Outcome) -> str:
    """Where the time went: the ingress backlog, CPU, why events waited in the fair queue."""
    empty = "-" if r.ingress_empty_at is None else f"{r.ingress_empty_at:.1f}s"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(r.waited.items())) or "-"
    after = ""
    if r.settled_ms:
        after = (
            f" (quiet published after it, while the noisy work drained: p50 "
            f"{percentile(r.settled_ms, 0.5):.0f} ms, p99 {percentile(r.settled_ms, 0.99):.0f} ms,"
            f" n={len(r.settled_ms)})"
        )
    return (
        f"ingress peak {r.ingress_peak} (empty again at {empty}{after}); replicas "
        f"{r.replica_cores:.2f} cores; machine {r.machine_busy:.0%} busy of {os.cpu_count()} "
        f"CPUs; fair-queue waits: {reasons}"
    )


def report(args: argparse.Namespace, results: dict[tuple[str, str], Outcome]) -> int:
    print(
        f"\n== fairness: 2 replicas, prefetch {args.prefetch}, tenant share "
        f"{args.tenant_max_in_flight or max(1, args.prefetch // 4)}, model latency "
        f"{args.latency * 1000:.0f} ms, quiet {args.rate:g}/s over "
        f"{args.quiet_conversations} conversations =="
    )
    table(results)
    met = targets(args, results)
    correct = correctness(results)
    print("\ndiagnostics (ingress: RabbitMQ ready messages sampled every 0.2 s):")
    for (mode, scenario), r in results.items():
        print(f"  {mode:6s} {scenario:5s}: {diagnostics(r)}")
        for line in r.slowest[:3]:
            print(f"      slow quiet: {line}")
    print(f"\nreplica log lines (at --log-level {args.log_level}), per run:")
    for (mode, scenario), r in results.items():
        print(f"  {mode:6s} {scenario:5s} ({r.log_dir}):")
        for name, count in r.log_lines.most_common(12):
            print(f"    {count:6d}  {name}")
    ok = met and correct
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def table(results: dict[tuple[str, str], Outcome]) -> None:
    print(
        f"{'mode':7s}{'scenario':9s}{'p50 ms':>8s}{'p99 ms':>8s}{'max ms':>9s}{'count':>10s}"
        f"{'drain s':>9s}{'answered':>12s}{'dead':>6s}{'dup':>5s}{'2 ids':>6s}  turns 1..N"
    )
    for (mode, scenario), r in results.items():
        drain = "-" if r.drain_seconds is None else f"{r.drain_seconds:.1f}"
        answered = f"{r.noisy_answered}/{r.noisy_expected}" if r.noisy_expected else "-"
        turns = {None: "-", True: "yes", False: f"NO ({r.turns_note})"}[r.turns_ok]
        count = f"{len(r.quiet_ms)}/{r.quiet_sent}"
        print(
            f"{mode:7s}{scenario:9s}{r.p50:8.0f}{r.p99:8.0f}{r.max:9.0f}{count:>10s}"
            f"{drain:>9s}{answered:>12s}{r.noisy_dead:6d}{r.duplicate_deliveries:5d}"
            f"{r.two_ids:6d}  {turns}"
        )
    print("(p50/p99/max/count: the quiet tenant's publish -> candidate, answered/sent;")
    print(" drain: noisy publish start -> the last noisy event's first candidate; dead: noisy")
    print(" events dead-lettered; dup: noisy candidate deliveries of an id already received;")
    print(" 2 ids: noisy events answered with two different candidate ids)")


def targets(args: argparse.Namespace, results: dict[tuple[str, str], Outcome]) -> bool:
    """Print the done-when targets; True when the fair mode meets those it is judged on."""
    ok = True
    print("\ntargets (quiet p99 <= 2 x the same mode's alone p99 + slack):")
    for (mode, scenario), r in results.items():
        alone = results.get((mode, "alone"))
        slack = TARGET_SLACK_MS.get(scenario)
        if alone is None or slack is None:
            continue
        limit = 2 * alone.p99 + slack
        met = r.p99 <= limit
        if mode != "fair":
            verdict = f"{'met' if met else 'missed'} (info)"
        elif scenario == "flood" and args.kill:
            verdict = f"{'met' if met else 'missed'} (kill run, info)"
        else:
            verdict = "PASS" if met else "FAIL"
            ok = ok and met
        print(
            f"  {mode:6s} {scenario:5s}: p99 {r.p99:.0f} ms <= 2 x {alone.p99:.0f} + "
            f"{slack:.0f} = {limit:.0f} ms  {verdict}"
        )
    return ok


def correctness(results: dict[tuple[str, str], Outcome]) -> bool:
    """Print each run's correctness problems; True when the fair mode has none."""
    ok = True
    print("\ncorrectness (judged for fair, info for before):")
    for (mode, scenario), r in results.items():
        problems = r.problems()
        ok = ok and not (mode == "fair" and problems)
        print(f"  {mode:6s} {scenario:5s}: {'; '.join(problems) or 'ok'}")
        for line in r.killed:
            print(f"      {line}")
    return ok


async def run(args: argparse.Namespace) -> int:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL),
        os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
    )
    modes = ["fair", "before"] if args.baseline else ["fair"]
    results: dict[tuple[str, str], Outcome] = {}
    try:
        async with fake_model_process(args.latency) as model_url:
            for mode in modes:
                for scenario in args.scenarios:
                    results[mode, scenario] = await run_one(args, urls, model_url, mode, scenario)
        return report(args, results)
    finally:
        removed = await remove_keys(urls.redis_url)
        print(f"removed {removed} Redis keys ({TEST_KEY_PREFIX}:*)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("aio_pika", "aiormq"):  # this process's own reconnects are expected noise
        logging.getLogger(name).setLevel(logging.CRITICAL)
    add = parser.add_argument
    add("--seconds", type=float, default=20.0, help="quiet load at least this long")
    add("--rate", type=float, default=20.0, help="quiet tenant's messages/s")
    add("--quiet-conversations", type=int, default=50)
    add("--burst", type=int, default=800, help="events on the noisy tenant's one conversation")
    add("--flood", type=int, default=2000, help="events of the noisy tenant's flood")
    add("--flood-conversations", type=int, default=200)
    add("--latency", type=float, default=0.05, help="fake model latency in seconds")
    add("--prefetch", type=int, default=32, help="per replica (the production default)")
    add("--tenant-max-in-flight", type=int, default=None, help="default: prefetch / 4")
    add("--lease-seconds", type=float, default=None, help="default: the service's")
    add("--timeout", type=float, default=600.0, help="for the noisy work, after --seconds")
    add("--baseline", action=argparse.BooleanOptionalAction, default=True,
        help="also run with LLM_BOT_FAIR_DISPATCH=false ('before')")  # fmt: skip
    add("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS),
        help="a subset to run (the targets need alone)")  # fmt: skip
    add("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
        help="the replicas' (their logs stay in the temp dirs printed)")  # fmt: skip
    add("--kill", action="store_true", help="SIGKILL a replica mid-flood (fair mode)")
    args = parser.parse_args()
    if min(args.rate, args.seconds, args.quiet_conversations) <= 0:
        parser.error("--rate, --seconds and --quiet-conversations must be positive")
    if min(args.burst, args.flood, args.flood_conversations) < 1:
        parser.error("--burst, --flood and --flood-conversations must be at least 1")
    raise SystemExit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
