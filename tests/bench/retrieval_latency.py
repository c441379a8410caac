"""What retrieval adds to the reply path, at 1,000 and 10,000 index entries per user.

Run by hand (not part of ``make test``), against the local Redis::

    .venv/bin/python -m tests.bench.retrieval_latency --entries 1000 10000

For each size, one user's index in Redis is filled with synthetic chat messages (embedded
with the configured local model, like the worker does), then ``--queries`` questions are
retrieved the way ``recall`` does it (``Retriever.prepare`` + ``retrieve``), timed from the
start of the query's embedding to the selection: p50 / p95 / max. Broken down: the query
embedding alone, a search with this process's copy of the index up to date (the usual case:
one round trip to check it), and a cold search (first search of the user in a process:
the whole index is loaded). Filler messages are timed too (they should cost ~0). A
baseline in the same run: one Redis round trip (PING), the floor of any index check. The
process is tuned as a service that consumes tunes it (``delivery/process_tuning.py``: the
garbage collector, matrix products on one thread), or left with Python's and numpy's
defaults (``--collector default``, or both).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
from opentelemetry.trace import NoOpTracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.adapters.script_embedder import MODEL_NAME, local_embedder
from llm_bot.delivery.process_tuning import CONSUMING_TUNING
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_items import conversation_entries
from llm_bot.memory.search_query import SearchQuery
from llm_bot.service.indexer import embed_entries
from llm_bot.service.retriever import RetrievalSettings, Retriever
from llm_bot.telemetry.metrics import Metrics
from tests.support.services import DEFAULT_REDIS_URL

PREFIX = "llmbot-bench-latency"
TOPICS = (
    "hiking", "pottery", "painting", "the kids", "a road trip", "the dance studio",
    "adoption", "a charity run", "the support group", "camping", "a new job", "the museum",
    "a concert", "swimming lessons", "a book club", "the garden", "a cooking class",
)  # fmt: skip
TEMPLATES = (
    "Last {day} I went to {topic} with my family and it was {mood}.",
    "I've been thinking about {topic} a lot lately, it makes me feel {mood}.",
    "Did I tell you about {topic}? It was {mood}, honestly.",
    "My friend recommended {topic}; I tried it on {day} and it was {mood}.",
    "We talked about {topic} for hours on {day}. So {mood}!",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Friday", "Saturday", "Sunday", "the weekend")
MOODS = ("amazing", "exhausting", "relaxing", "a bit scary", "so inspiring", "fun")
QUESTIONS = (
    "When did I go to {topic}?",
    "What did my friend recommend about {topic}?",
    "How did {topic} make me feel?",
    "Who did I talk to about {topic}?",
)


def history(count: int, rng: random.Random) -> list[ChatMessage]:
    messages = []
    for n in range(count):
        text = rng.choice(TEMPLATES).format(
            day=rng.choice(DAYS), topic=rng.choice(TOPICS), mood=rng.choice(MOODS)
        )
        messages.append(
            ChatMessage(
                id=f"e{n}:user",
                role="user" if n % 2 == 0 else "assistant",
                content=f"{text} (note {n})",
                created_at="2025-01-01T00:00:00+00:00",
                turn=n // 2 + 1,
                seq=n % 2,
                name="Ann" if n % 2 == 0 else "Bob",
            )
        )
    return messages


def summary(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"| {label} | {statistics.median(ordered) * 1000:.2f} | {p95 * 1000:.2f} | "
        f"{ordered[-1] * 1000:.2f} |"
    )


async def timed(call: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    durations = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        durations.append(time.perf_counter() - started)
    return durations


async def one_size(
    client: aioredis.Redis, entries: int, queries: int, model: str, *, gc_as_consuming: bool
) -> None:
    rng = random.Random(entries)
    keys = RedisKeys(prefix=PREFIX)
    key = ConversationKey("bench", f"user{entries}-{len(model)}", "c1")
    embedder = local_embedder(model)
    index = RedisRecallIndex(client=client, keys=keys, ttl_seconds=3600, cache_entries=10**6)
    started = time.perf_counter()
    batch = conversation_entries("c1", history(entries, rng), indexed_at=time.time())
    for start in range(0, len(batch), 256):
        part = batch[start : start + 256]
        embedded = await embed_entries(embedder, part)
        await index.upsert(
            key.tenant_id, key.user_id, embedded, model=embedder.name, erasure=""
        )  # fmt: skip
    filled = time.perf_counter() - started
    retriever = Retriever(
        embedder=embedder,
        index=index,
        settings=RetrievalSettings(min_score=0.45, topic_similarity=0.85),  # the defaults
        metrics=Metrics(registry=CollectorRegistry()),
        tracer=NoOpTracerProvider().get_tracer(__name__),
    )
    questions = [rng.choice(QUESTIONS).format(topic=rng.choice(TOPICS)) for _ in range(queries)]
    asked = itertools.cycle(questions)

    async def retrieve() -> None:
        query = retriever.prepare(next(asked))
        await retriever.retrieve(query, key, exclude=(), topic=None)

    async def embed_only() -> None:
        await embedder.embed([next(asked)], purpose="query")

    vector = (await embedder.embed(["warm up"], purpose="query"))[0]
    cold_index = RedisRecallIndex(client=client, keys=keys, ttl_seconds=3600, cache_entries=10**6)

    async def cold() -> None:
        fresh = RedisRecallIndex(client=client, keys=keys, ttl_seconds=3600, cache_entries=10**6)
        query = SearchQuery(vector=vector, terms=keyword_terms("hiking with family"), limit=100)
        await fresh.search(key.tenant_id, key.user_id, query, model=embedder.name)

    async def warm() -> None:
        query = SearchQuery(vector=vector, terms=keyword_terms(next(asked)), limit=100)
        await cold_index.search(key.tenant_id, key.user_id, query, model=embedder.name)

    async def filler() -> None:
        await retriever.retrieve(retriever.prepare("ok thanks 👍"), key, exclude=(), topic=None)

    await retrieve()  # warm-up: model and this index's copy loaded
    await warm()
    if gc_as_consuming:  # as in a service that consumes (``delivery/process_tuning.py``)
        CONSUMING_TUNING.hold()
    try:
        rows = [
            summary("retrieval on the reply path (embed + search)", await timed(retrieve, queries)),
            summary("  query embedding alone", await timed(embed_only, queries)),
            summary("  search, index copy up to date", await timed(warm, queries)),
            summary("  search, cold (index loaded)", await timed(cold, max(5, queries // 10))),
            summary("filler message (no search)", await timed(filler, queries)),
            summary("baseline: one Redis round trip (PING)", await timed(client.ping, queries)),
        ]
    finally:
        if gc_as_consuming:
            CONSUMING_TUNING.release()
    collector = "as while consuming" if gc_as_consuming else "Python's and numpy's defaults"
    print(
        f"\n## {entries:,} entries for one user, {embedder.name} (filled in {filled:.1f} s; "
        f"process tuning: {collector})\n"
    )
    print("| step | p50 ms | p95 ms | max ms |\n|---|---:|---:|---:|")
    print("\n".join(rows))
    await index.forget_user(key.tenant_id, key.user_id)
    await embedder.aclose()


async def main(args: argparse.Namespace) -> None:
    client = aioredis.from_url(os.environ.get("REDIS_URL", DEFAULT_REDIS_URL))
    try:
        for entries in args.entries:
            for model in args.embedding_model:
                for gc_as_consuming in args.collector:
                    await one_size(
                        client, entries, args.queries, model, gc_as_consuming=gc_as_consuming
                    )
    finally:
        async for name in client.scan_iter(match=f"{PREFIX}:*", count=1000):
            await client.unlink(name)
        await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--embedding-model",
        nargs="+",
        default=[MODEL_NAME],
        help=f"LLM_BOT_EMBEDDING_MODEL values, each measured in turn (e.g. {MODEL_NAME} "
        "all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--collector",
        nargs="+",
        choices=("consuming", "default"),
        default=["consuming"],
        help="the process while timing: tuned as a service that consumes (matrix products on "
        "one thread, the collector's start-up "
        "heap frozen, generation 0 at 10,000: delivery/process_tuning.py), Python's defaults, or both",
    )
    args = parser.parse_args()
    args.collector = [choice == "consuming" for choice in args.collector]
    asyncio.run(main(args))
