"""Time to first token and total latency through ``llm-bot gateway``, against calling the
fake model directly, at several concurrencies (SPEC 8; issue: the gateway adds ≤ 15 ms p50
to time to first token at 32 concurrent streams).

Every part runs in its own process, as deployed: the fake model (streaming its reply at
``--rate`` pieces per second, the first piece after one interval), one ``llm-bot run``
consumer (``--consumers N``: N replicas), one ``llm-bot gateway``; this process drives the load with the official openai SDK
(``stream=True``), the same client code for both paths. Each of N concurrent clients sends
``--rounds`` requests one after another, each a new turn of its own user's conversation
(one-sentence questions of 20-25 words, as a caller would ask; the fake model echoes them,
so replies are ~25 pieces), after a think time drawn from 0-``--think`` seconds (the same
seeded draws for both paths): N callers who do not all speak in the same millisecond.

    .venv/bin/python -m tests.bench.gateway --streams 1 32 --rounds 10

Baselines in the same run: the same streams sent straight to the fake model ("direct"), and
sent to the service over the bus without HTTP ("bus": this process publishes the events
with a direct reply-to address and reads the deltas with the gateway's own bus client; the
gateway path minus the bus path is what the HTTP front door itself adds). "Added" is a
path's percentile minus the direct path's. CPU per request: each process's user + system
time over the path's run divided by its requests (bench: this load-generating process).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aio_pika
import aiohttp
import openai
import redis.asyncio as redis
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.config import Settings
from llm_bot.contract import CandidateDeltaV1, CandidateV1, InternalEventV2
from llm_bot.gateway.bus import GatewayBus
from tests.bench.processes import cpu_seconds, fake_model_process
from tests.support.events import new_id
from tests.support.gateway import TENANT_KEYS, gateway_keys
from tests.support.harness import TEST_KEY_PREFIX, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

QUESTIONS = (
    "Could you check where my order from last Tuesday is right now, and tell me when it "
    "should arrive at my home address please?",
    "I would like to change the delivery address on my latest order to my office in the "
    "city centre, is that still possible today?",
    "My package arrived yesterday but one of the two items was missing from the box, what "
    "should I do to get it sent again?",
    "Can you remind me which payment method I used for the headphones I bought last month, "
    "and whether the refund was already made?",
    "Is there any way to book a delivery slot for Saturday morning instead of Friday "
    "afternoon, because nobody will be at home on Friday?",
)
"""The fake model echoes the question: replies of ~25 pieces."""

Ask = Callable[[str, int, "Timings"], Awaitable[None]]
"""One request of user ``str``, question ``int``, timed into ``Timings``."""


@dataclass
class Timings:
    first_token: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)

    def row(self, label: str, baseline: Timings | None) -> str:
        ttft50, ttft95 = _p(self.first_token, 50), _p(self.first_token, 95)
        tot50, tot95 = _p(self.total, 50), _p(self.total, 95)
        added = "- | -"
        if baseline is not None:
            added = (
                f"{ttft50 - _p(baseline.first_token, 50):+.1f} / "
                f"{ttft95 - _p(baseline.first_token, 95):+.1f} | "
                f"{tot50 - _p(baseline.total, 50):+.1f}"
            )
        return f"| {label} | {ttft50:.1f} / {ttft95:.1f} | {tot50:.1f} / {tot95:.1f} | {added} |"


def _p(values: list[float], percentile: int) -> float:
    ordered = sorted(values)
    if percentile == 50:
        return statistics.median(ordered) * 1000
    return ordered[min(len(ordered) - 1, int(len(ordered) * percentile / 100))] * 1000


def _sdk(base_url: str, api_key: str) -> tuple[Ask, AsyncOpenAI]:
    """Streaming chat completions with the official SDK (to the model, or the gateway)."""
    client = AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        max_retries=0,
        timeout=60,
        http_client=openai.DefaultAioHttpClient(),
    )

    async def ask(user: str, n: int, timings: Timings) -> None:
        started = time.perf_counter()
        first: float | None = None
        stream = await client.chat.completions.create(
            model="llm-bot",
            messages=[{"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]}],
            user=user,
            metadata={"conversation_id": f"{user}-c"},
            stream=True,
        )
        pieces = 0
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces += 1
                first = first or time.perf_counter()
        if first is None or pieces < 2:
            raise RuntimeError(f"the reply did not stream ({pieces} pieces)")
        timings.first_token.append(first - started)
        timings.total.append(time.perf_counter() - started)

    return ask, client


def _over_bus(bus: GatewayBus) -> Ask:
    """The gateway's own bus client without HTTP: publish, read deltas up to the candidate."""

    async def ask(user: str, n: int, timings: Timings) -> None:
        event = InternalEventV2.model_validate(
            {
                "schema": "internal.event.v2",
                "id": new_id("bus"),
                "type": "message",
                "tenant_id": "tenant_a",
                "user_id": user,
                "conversation_id": f"{user}-c",
                "created_at": datetime.now(UTC),
                "annotations": [{"kind": "prompt", "text": QUESTIONS[n % len(QUESTIONS)]}],
            }
        )
        started = time.perf_counter()
        first: float | None = None
        async with bus.request(event, {}) as wait:
            while True:
                reply = await asyncio.wait_for(wait.next(), 60)
                if isinstance(reply, CandidateV1):
                    break
                if not isinstance(reply, CandidateDeltaV1):
                    raise TypeError(f"the event failed: {reply}")
                first = first or time.perf_counter()
        if first is None:
            raise RuntimeError("the reply did not stream")
        timings.first_token.append(first - started)
        timings.total.append(time.perf_counter() - started)

    return ask


async def _load(ask: Ask, streams: int, rounds: int, think: float) -> Timings:
    timings = Timings()
    run = uuid.uuid4().hex[:6]

    async def user_loop(u: int) -> None:
        pauses = random.Random(u)  # the same think times on every path
        for n in range(rounds):
            await asyncio.sleep(pauses.uniform(0, think))
            await ask(f"bench-{run}-{u}", u + n, timings)

    await ask(f"bench-{run}-warm", 0, Timings())  # connections, caches
    await asyncio.gather(*(user_loop(u) for u in range(streams)))
    return timings


async def _measured(
    ask: Ask, streams: int, rounds: int, think: float, pids: dict[str, int]
) -> tuple[Timings, dict[str, float]]:
    """The path's timings, and each process's CPU ms per request over the run."""
    before = {name: _cpu(pid) for name, pid in pids.items()}
    timings = await _load(ask, streams, rounds, think)
    requests = streams * rounds + 1
    cpu = {name: (_cpu(pid) - before[name]) * 1000 / requests for name, pid in pids.items()}
    return timings, cpu


async def _retrieval_totals(ports: list[int]) -> tuple[float, float]:
    """Seconds and count of ``llmbot_retrieval_duration_seconds`` over the consumers (from
    prepare to result: the query's embedding, the index search, the topic bookkeeping)."""
    seconds = count = 0.0
    async with aiohttp.ClientSession() as session:
        for port in ports:
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                text = await response.text()
            for family in text_string_to_metric_families(text):
                if family.name != "llmbot_retrieval_duration_seconds":
                    continue
                for sample in family.samples:
                    if sample.name.endswith("_sum"):
                        seconds += sample.value
                    elif sample.name.endswith("_count"):
                        count += sample.value
    return seconds, count


def _cpu(pid: int) -> float:
    if pid == os.getpid():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    return cpu_seconds(pid)


def _pid(process: ConsumerProcess) -> int:
    if process.process is None:
        raise RuntimeError("not started")
    return process.process.pid


async def run(
    streams: list[int],
    rounds: int,
    rate: float,
    embeddings: str,
    think: float,
    *,
    replicas: int = 1,
    stream_interval_ms: int = 40,
) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    logs = Path(tempfile.mkdtemp(prefix="llm-bot-gateway-bench-"))
    model_pids: list[int] = []
    async with fake_model_process(0.0, stream_rate=rate, pids=model_pids) as model_url:
        settings: Settings = settings_for_test(
            urls,
            model_url,
            log_level="warning",
            embeddings=embeddings,
            gateway_keys=gateway_keys(),
            prefetch=64,
            stream_interval_ms=stream_interval_ms,
        )
        consumers = [
            ConsumerProcess(settings, log_path=logs / f"consumer{n}.log") for n in range(replicas)
        ]
        gateway = ConsumerProcess(settings, log_path=logs / "gateway.log", command="gateway")
        bus = GatewayBus(
            amqp_url=settings.amqp_url.get_secret_value(),
            topology=Topology.from_settings(settings.broker),
        )
        try:
            for consumer in consumers:
                await consumer.start()
            for consumer in consumers:
                await consumer.wait_ready(within=60)
            await gateway.start()
            await gateway.wait_ready(within=60)
            await bus.start()
            direct, direct_client = _sdk(model_url, "any")
            gateway_url = f"http://127.0.0.1:{gateway.api_port}/v1"
            through, through_client = _sdk(gateway_url, TENANT_KEYS["tenant_a"])
            pids = {
                "bench": os.getpid(),
                "model": model_pids[0],
                **{f"consumer{n}": _pid(c) for n, c in enumerate(consumers)},
                "gateway": _pid(gateway),
            }
            print(
                f"fake model streaming {rate:g} pieces/s, replies of ~25 pieces; "
                f"{rounds} requests per stream, think time 0-{think:g} s; "
                f"embeddings={embeddings}; {replicas} consumer(s); "
                f"stream interval {stream_interval_ms} ms; logs in {logs}\n"
            )
            print(
                "| path | streams | TTFT p50 / p95 ms | total p50 / p95 ms "
                "| TTFT added p50 / p95 ms | total added p50 ms "
                "| CPU ms per request: consumer / gateway / bench | retrieval mean ms |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for count in streams:
                baseline: Timings | None = None
                for label, ask in (
                    ("direct to the model", direct),
                    ("bus (no HTTP)", _over_bus(bus)),
                    ("through the gateway", through),
                ):
                    ports = [c.http_port for c in consumers]
                    spent, searches = await _retrieval_totals(ports)
                    timings, cpu = await _measured(ask, count, rounds, think, pids)
                    spent_after, searches_after = await _retrieval_totals(ports)
                    searched = searches_after - searches
                    retrieval = (
                        f"{(spent_after - spent) / searched * 1000:.1f}" if searched else "-"
                    )
                    consumer_cpu = sum(v for k, v in cpu.items() if k.startswith("consumer"))
                    used = f"{consumer_cpu:.1f} / {cpu['gateway']:.1f} / {cpu['bench']:.1f}"
                    print(f"{timings.row(f'{label} | {count}', baseline)} {used} | {retrieval} |")
                    baseline = baseline or timings
            await direct_client.close()
            await through_client.close()
        finally:
            await bus.close()
            await gateway.stop()
            for consumer in consumers:
                await consumer.stop()
            await _clean_up(settings)


async def _clean_up(settings: Settings) -> None:
    """Delete the run's queues and Redis keys (its names are its own)."""
    connection = await aio_pika.connect(settings.amqp_url.get_secret_value())
    async with connection:
        channel = await connection.channel()
        for queue in Topology.from_settings(settings.broker).queues():
            await channel.queue_delete(queue)
    client = redis.Redis.from_url(settings.redis_url.get_secret_value())
    async for name in client.scan_iter(match=f"{TEST_KEY_PREFIX}*", count=1000):
        await client.unlink(name)
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--rounds", type=int, default=10, help="requests per stream")
    parser.add_argument("--rate", type=float, default=50.0, help="model pieces per second")
    parser.add_argument("--embeddings", choices=["local", "off"], default="local")
    parser.add_argument("--think", type=float, default=1.0, help="think time up to (s)")
    parser.add_argument("--consumers", type=int, default=1, help="llm-bot run replicas")
    parser.add_argument(
        "--stream-interval-ms", type=int, default=40, help="LLM_BOT_STREAM_INTERVAL_MS"
    )
    args = parser.parse_args()
    asyncio.run(
        run(
            args.streams,
            args.rounds,
            args.rate,
            args.embeddings,
            args.think,
            replicas=args.consumers,
            stream_interval_ms=args.stream_interval_ms,
        )
    )


if __name__ == "__main__":
    main()
