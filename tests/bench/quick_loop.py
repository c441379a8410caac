"""Quick loop: end-to-end events/s of the in-process service with the fake model.

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.quick_loop --events 1000 --conversations 100 --latency 0

Publishes N message events over C conversations through the real broker, waits for every
candidate, and prints events/s, the per-event latency percentiles (publish → candidate)
and this process's CPU per event (service and fake model). Messages are one-sentence
questions on varied topics (not filler, so each reply embeds its query and searches);
``--embeddings off`` measures the same without retrieval: run both to see what the
query's embedding and search add to the reply path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time

from llm_bot.fake_model import FakeModelServer
from tests.support.events import message_event, new_id
from tests.support.harness import TEST_KEY_PREFIX, bot, settings_for_test
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

TOPICS = (
    "Is the blue kettle still 250 baht, and can it ship to Chiang Mai this week?",
    "My order 4471 arrived with a cracked lid; how do I send it back?",
    "Which of your rice cookers keeps rice warm the longest overnight?",
    "Can I pay for the air fryer in three monthly instalments?",
    "Do you have the hiking boots in size 43, or only 42?",
    "What time does the Sukhumvit branch close on public holidays?",
    "Could you recommend a gift for my mother, who loves gardening?",
    "Why was my card charged twice for the same toaster yesterday?",
)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(  # noqa: PLR0917  # the bench's command line, one to one
    events: int,
    conversations: int,
    latency: float,
    prefetch: int,
    embeddings: str,
    personas: str | None = None,
) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    async with FakeModelServer() as fake:
        fake.set_latency(latency)
        settings = settings_for_test(
            urls,
            fake.base_url,
            prefetch=prefetch,
            log_level="warning",
            embeddings=embeddings,
            personas_path=personas,
        )
        convs = [new_id("c") for _ in range(conversations)]
        user = new_id("u")
        async with bot(settings) as (service, client):
            sent: dict[str, float] = {}
            cpu = cpu_seconds()
            started = time.perf_counter()
            for i in range(events):
                event = message_event(
                    tenant="bench",
                    user=user,
                    conversation=convs[i % conversations],
                    text=f"{TOPICS[(i // conversations) % len(TOPICS)]} ({i})",
                )
                sent[str(event["id"])] = time.perf_counter()
                await client.publish(event)
            latencies = []
            for _ in range(events):
                received = await client.next_candidate(within=120)
                latencies.append(time.perf_counter() - sent[received.body["event_id"]])
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds() - cpu
        async for name in service.redis.scan_iter(match=f"{TEST_KEY_PREFIX}:*", count=1000):
            await service.redis.unlink(name)
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    print(
        f"embeddings={embeddings} personas={personas} events={events} conversations={conversations} "
        f"prefetch={prefetch} model_latency={latency * 1000:.0f}ms elapsed={elapsed:.2f}s "
        f"events/s={events / elapsed:.1f} p50={p50:.1f}ms p99={p99:.1f}ms "
        f"cpu/event={cpu / events * 1000:.2f}ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--prefetch", type=int, default=32)
    parser.add_argument("--embeddings", choices=["local", "off"], default="local")
    parser.add_argument(
        "--personas",
        help="an LLM_BOT_PERSONAS_PATH file (one with flows puts the supervisor in front of "
        "every event; the bench's messages name no persona, so they all go to the chat)",
    )
    args = parser.parse_args()
    asyncio.run(
        run(
            args.events,
            args.conversations,
            args.latency,
            args.prefetch,
            args.embeddings,
            args.personas,
        )
    )


if __name__ == "__main__":
    main()
