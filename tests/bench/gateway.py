"""Time to first token and total latency through ``llm-bot gateway``, against calling the
fake model directly, at several concurrencies (SPEC 8; issue: the gateway adds ≤ 15 ms p50
to time to first token at 32 concurrent streams).

Every part runs in its own process, as deployed: the fake model (streaming its reply at
``--rate`` pieces per second, the first piece after one interval), one ``llm-bot run``
consumer, one ``llm-bot gateway``; this process drives the load with the official openai SDK
(``stream=True``), the same client code for both paths. Each of N concurrent clients sends
``--rounds`` requests one after another, each in a new conversation turn of its own user.

    .venv/bin/python -m tests.bench.gateway --streams 1 32 --rounds 10

Baseline in the same run: the same streams sent straight to the fake model. "Added" is the
gateway path's percentile minus the direct path's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika
import openai
import redis.asyncio as redis
from openai import AsyncOpenAI

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.config import Settings
from tests.bench.processes import fake_model_process
from tests.support.gateway import TENANT_KEYS, gateway_keys
from tests.support.harness import TEST_KEY_PREFIX, settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

PROMPT_WORDS = 24
"""The fake model echoes the prompt: a reply of about this many pieces (plus "echo:")."""


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


async def _one(client: AsyncOpenAI, user: str, n: int, timings: Timings) -> None:
    text = " ".join(f"word{n}_{i}" for i in range(PROMPT_WORDS))
    started = time.perf_counter()
    first: float | None = None
    stream = await client.chat.completions.create(
        model="llm-bot",
        messages=[{"role": "user", "content": text}],
        user=user,
        metadata={"conversation_id": f"{user}-c"},
        stream=True,
    )
    pieces = 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces += 1
            if first is None:
                first = time.perf_counter()
    if first is None or pieces < 2:
        raise RuntimeError(f"the reply did not stream ({pieces} pieces)")
    timings.first_token.append(first - started)
    timings.total.append(time.perf_counter() - started)


async def _load(base_url: str, api_key: str, streams: int, rounds: int) -> Timings:
    timings = Timings()
    client = AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        max_retries=0,
        timeout=60,
        http_client=openai.DefaultAioHttpClient(),
    )
    run = uuid.uuid4().hex[:6]

    async def user_loop(u: int) -> None:
        for n in range(rounds):
            await _one(client, f"bench-{run}-{u}", n, timings)

    await _one(client, f"bench-{run}-warm", 0, Timings())  # connections, caches
    await asyncio.gather(*(user_loop(u) for u in range(streams)))
    await client.close()
    return timings


async def run(streams: list[int], rounds: int, rate: float, embeddings: str) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    logs = Path(tempfile.mkdtemp(prefix="llm-bot-gateway-bench-"))
    async with fake_model_process(0.0, stream_rate=rate) as model_url:
        settings: Settings = settings_for_test(
            urls,
            model_url,
            log_level="warning",
            embeddings=embeddings,
            gateway_keys=gateway_keys(),
            prefetch=64,
        )
        consumer = ConsumerProcess(settings, log_path=logs / "consumer.log")
        gateway = ConsumerProcess(settings, log_path=logs / "gateway.log", command="gateway")
        try:
            await consumer.start()
            await consumer.wait_ready(within=60)
            await gateway.start()
            await gateway.wait_ready(within=60)
            gateway_url = f"http://127.0.0.1:{gateway.http_port}/v1"
            print(
                f"fake model streaming {rate:g} pieces/s, replies of ~{PROMPT_WORDS + 1} pieces; "
                f"{rounds} requests per stream; embeddings={embeddings}; logs in {logs}\n"
            )
            print(
                "| path | streams | TTFT p50 / p95 ms | total p50 / p95 ms "
                "| TTFT added p50 / p95 ms | total added p50 ms |"
            )
            print("|---|---|---|---|---|---|")
            for count in streams:
                direct = await _load(model_url, "any", count, rounds)
                through = await _load(gateway_url, TENANT_KEYS["tenant_a"], count, rounds)
                print(direct.row(f"direct to the model | {count}", None))
                print(through.row(f"through the gateway | {count}", direct))
        finally:
            await gateway.stop()
            await consumer.stop()
            await _clean_up(settings)


async def _clean_up(settings: Settings) -> None:
    """Delete the run's queues and Redis keys (its names are its own)."""
    connection = await aio_pika.connect(settings.amqp_url.get_secret_value())
    async with connection:
        channel = await connection.channel()
        for queue in Topology.from_settings(settings).queues():
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
    args = parser.parse_args()
    asyncio.run(run(args.streams, args.rounds, args.rate, args.embeddings))


if __name__ == "__main__":
    main()
