"""CPU per model request of the openai SDK on its two HTTP transports (httpx, aiohttp).

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.model_client [--requests 1500] [--rounds 4]

The fake model runs in its own process and answers at once; this process sends a
10-message Chat Completions request through ``AsyncOpenAI.post`` (as the service does),
``--concurrency`` at a time, alternating the transports round by round. Prints the
median CPU milliseconds per request of each transport.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from openai import AsyncOpenAI, DefaultAioHttpClient
from openai.types.chat import ChatCompletion

from tests.bench.floor import PROMPT
from tests.bench.processes import fake_model_process


async def cpu_per_request(client: AsyncOpenAI, requests: int, concurrency: int) -> float:
    body: dict[str, Any] = {"model": "fake-model", "messages": PROMPT}
    queue = iter(range(requests))

    async def lane() -> None:
        for _ in queue:
            await client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    start = time.process_time()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return (time.process_time() - start) / requests * 1000


async def run(args: argparse.Namespace) -> None:
    async with fake_model_process(0.0) as base_url:
        clients = {
            "httpx (SDK default)": AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0),
            "aiohttp": AsyncOpenAI(
                base_url=base_url,
                api_key="x",
                max_retries=0,
                http_client=DefaultAioHttpClient(),
            ),
        }
        results: dict[str, list[float]] = {name: [] for name in clients}
        try:
            for client in clients.values():
                await cpu_per_request(client, 100, args.concurrency)  # warm up
            for _ in range(args.rounds):
                for name, client in clients.items():
                    results[name].append(
                        await cpu_per_request(client, args.requests, args.concurrency)
                    )
        finally:
            for client in clients.values():
                await client.close()
    base = statistics.median(results["httpx (SDK default)"])
    for name, values in results.items():
        median = statistics.median(values)
        print(
            f"{name:20s} {median:.3f} ms CPU/request (median of {len(values)}; "
            f"{median / base:.2f} x httpx)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
