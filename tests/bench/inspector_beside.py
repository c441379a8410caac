"""The consumer's throughput with and without the memory inspector in use beside it (issue
29 item 8: 5 inspector page loads per second must not change it).

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.inspector_beside --rounds 3

One run, on the RabbitMQ and Redis at AMQP_URL / REDIS_URL: the big user of
``tests/bench/inspector.py`` (10,000 index entries, 500 facts) is seeded; ``llm-bot
inspect`` and the fake model (answering at once, or after ``--latency`` seconds) run in
their own processes for the whole run. Then, ``--rounds`` times, alternating (without first): the throughput bench's (c')
consumer, one ``llm-bot run`` process (``throughput.replicated_on``: a prefilled
backlog, events/s between the first and the last candidate, the consumer's CPU per event
from ``/proc``), without page loads, then with ``--rate`` page loads per second against
the inspector over HTTP, the user's page and a "why" dry run in turn, started on a fixed
schedule whatever the answers' times (an open loop), from when the consumer is ready until
its last candidate (then the bench waits for the inspector to be idle again). Printed: each round's figures, the
medians, the ratio with / without, and what the inspector served (loads per second,
p50 / p95, failures). On a shared machine the ratio of the same run is the figure; the
load average is printed with it.

``--inspector-core``: the inspector on a core of its own (the last), the bench and what
it starts (the fake model, each consumer) on the others, as a deployment that gives the
inspector CPU the consumer does not use (its own container with a CPU limit, or another
machine); Redis and RabbitMQ stay where the system runs them. Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from llm_bot.config import Settings
from llm_bot.logs import configure_logging
from tests.bench.inspector import KEY, inspector_settings, page_paths, seed_big_user
from tests.bench.processes import cpu_seconds, fake_model_process
from tests.bench.throughput import ReplicatedRun, remove_keys, replicated_on
from tests.support.inspector import login
from tests.support.processes import ConsumerProcess, free_port
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls


@dataclass
class PageLoads:
    """What the inspector served while the consumer ran."""

    seconds: list[float] = field(default_factory=list)
    failures: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0
    """The inspector process's CPU seconds (from ``/proc``) while the loads ran."""

    def summary(self) -> str:
        done = len(self.seconds)
        if done < 2:
            return f"{done} page loads, {self.failures} failed"
        quantiles = statistics.quantiles(self.seconds, n=100)
        return (
            f"{done / self.elapsed:.2f} page loads/s served ({done} in {self.elapsed:.0f} s), "
            f"p50 {quantiles[49] * 1000:.0f} ms, p95 {quantiles[94] * 1000:.0f} ms, "
            f"{self.failures} failed, {self.cpu / done * 1000:.0f} ms inspector CPU per load"
        )


@contextlib.asynccontextmanager
async def running_inspector(settings: Settings) -> AsyncIterator[tuple[str, int]]:
    """``llm-bot inspect`` in its own process on ``settings``; yields its base URL and
    process id once its login page answers."""
    log = Path(tempfile.mkdtemp(prefix="llm-bot-bench-")) / "inspector.log"
    process = ConsumerProcess(settings, log_path=log, command="inspect")
    base_url = f"http://{settings.inspector_host}:{settings.inspector_port}"
    await process.start()
    try:
        async with httpx.AsyncClient(base_url=base_url) as http, asyncio.timeout(60):
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get("/login")).status_code == 200:
                        break
                if process.process is not None and process.process.returncode is not None:
                    raise RuntimeError(f"llm-bot inspect exited: see {log}")
                await asyncio.sleep(0.2)
        assert process.process is not None
        yield base_url, process.process.pid
    finally:
        await process.stop()


@contextlib.asynccontextmanager
async def page_loads(
    inspector: tuple[str, int], paths: Sequence[str], rate: float, loads: PageLoads
) -> AsyncIterator[None]:
    """``rate`` GETs per second of ``paths`` in turn while inside, each started on its
    schedule (not after the previous answer), logged in with the bench's key, counted in
    ``loads``; on exit, once every answer is in, waits until the inspector is idle again
    (so that what it still computes does not fall into the next run)."""
    base_url, pid = inspector
    stop = asyncio.Event()

    async def load(http: httpx.AsyncClient, path: str) -> None:
        started = time.perf_counter()
        try:
            response = await http.get(path)
        except httpx.HTTPError:
            loads.failures += 1
            return
        if response.status_code != 200:
            loads.failures += 1
            return
        loads.seconds.append(time.perf_counter() - started)

    async def schedule(http: httpx.AsyncClient) -> None:
        pending: set[asyncio.Task[None]] = set()
        started, sent = time.perf_counter(), 0
        while not stop.is_set():
            task = asyncio.create_task(load(http, paths[sent % len(paths)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
            wait = started + sent / rate - time.perf_counter()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, wait))
        loads.elapsed = time.perf_counter() - started
        await asyncio.gather(*pending)

    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        assert (await login(http, KEY)).status_code in (200, 303)
        cpu = cpu_seconds(pid)
        scheduler = asyncio.create_task(schedule(http))
        try:
            yield
        finally:
            stop.set()
            await scheduler
            loads.cpu = cpu_seconds(pid) - cpu
    await idle(pid)


async def idle(pid: int, within: float = 120.0) -> None:
    """Until ``pid`` used under 5% of a core over one second (or ``within`` passed)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            while True:
                before = cpu_seconds(pid)
                await asyncio.sleep(1.0)
                if cpu_seconds(pid) - before < 0.05:
                    return


async def consumer_round(
    urls: ServiceUrls,
    model_url: str,
    args: argparse.Namespace,
    loads_against: tuple[str, int] | None,
    paths: Sequence[str],
) -> tuple[ReplicatedRun, PageLoads | None]:
    """The (c') backlog through one consumer; with ``loads_against``, page loads against
    that inspector while the consumer works."""
    loads = PageLoads()
    beside = None if loads_against is None else page_loads(loads_against, paths, args.rate, loads)
    run = await replicated_on(
        urls,
        model_url,
        events=args.events,
        conversations=args.conversations,
        prefetch=args.prefetch,
        count=1,
        log_level="warning",
        beside=beside,
    )
    return run, (loads if beside is not None else None)


async def run(args: argparse.Namespace) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    settings = inspector_settings(urls, inspector_host="127.0.0.1", inspector_port=free_port())
    key = await seed_big_user(settings, entries=args.entries, facts=args.facts)
    cores = sorted(os.sched_getaffinity(0))
    if args.inspector_core:  # the processes started from here on inherit the bench's cores
        if len(cores) < 2:
            raise SystemExit("--inspector-core needs two cores or more")
        os.sched_setaffinity(0, cores[:-1])
    paths = list(page_paths(key).values())
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    try:
        async with (
            fake_model_process(args.latency) as model_url,
            running_inspector(settings) as inspector,
        ):
            base_url = inspector[0]
            if args.inspector_core:  # each of its threads (the call sets one thread's)
                for thread in os.listdir(f"/proc/{inspector[1]}/task"):
                    os.sched_setaffinity(int(thread), cores[-1:])
                print(f"inspector on core {cores[-1]}, the rest on cores {cores[:-1]}")
            # one load of each page first: the index's first load into the inspector
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
                await login(http, KEY)
                for path in paths:
                    assert (await http.get(path)).status_code == 200, path
            for round_ in range(1, args.rounds + 1):
                for with_loads in (False, True):
                    target = inspector if with_loads else None
                    result, loads = await consumer_round(urls, model_url, args, target, paths)
                    rates[with_loads].append(result.rate.per_second)
                    cpu[with_loads].append(result.rate.cpu_per_event * 1000)
                    print(
                        f"round {round_}, {'with' if with_loads else 'without'} page loads: "
                        f"{result.rate.per_second:.1f} events/s, "
                        f"{result.rate.cpu_per_event * 1000:.2f} ms consumer CPU/event"
                        + (f"; inspector: {loads.summary()}" if loads else "")
                        + (f"; {'; '.join(result.problems)}" if result.problems else ""),
                        flush=True,
                    )
    finally:
        print(f"removed {await remove_keys(urls.redis_url)} Redis keys of this run")
    without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
    pairs = [w / o for o, w in zip(rates[False], rates[True], strict=True)]
    print(
        f"consumer events/s, median of {args.rounds}: without page loads {without:.1f}, with "
        f"{args.rate:g}/s {with_:.1f}: ratio {with_ / without:.3f} (per round: "
        f"{', '.join(f'{p:.3f}' for p in pairs)}); consumer CPU/event median "
        f"{statistics.median(cpu[False]):.2f} / {statistics.median(cpu[True]):.2f} ms"
    )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs, without first")
    parser.add_argument("--rate", type=float, default=5.0, help="inspector page loads per second")
    parser.add_argument("--events", type=int, default=2000, help="events per consumer run")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--prefetch", type=int, default=32)
    parser.add_argument(
        "--latency", type=float, default=0.0, help="the fake model's latency, s (0: at once)"
    )
    parser.add_argument("--entries", type=int, default=10_000, help="the user's index entries")
    parser.add_argument("--facts", type=int, default=500, help="the user's facts")
    parser.add_argument(
        "--inspector-core",
        action="store_true",
        help="the inspector on a core of its own, the bench and the consumers on the others",
    )
    configure_logging(level="warning", fmt="json")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
