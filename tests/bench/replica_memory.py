"""Memory of one replica serving many users in turn: does the index cache's byte budget
bound it? (issue 41, "bounded memory per replica")

Run by hand (not part of ``make test``); it starts a ``redis-server`` of its own on a free
port (nothing of the machine's Redis is touched)::

    .venv/bin/python -m tests.bench.replica_memory --users 1000

The replica is the service's own ``RedisRecallIndex`` with its ``SnapshotCache`` at the
default bounds (``LLM_BOT_RETRIEVAL_CACHE_ENTRIES``, ``LLM_BOT_RETRIEVAL_CACHE_MB``; both
can be given). Users are served one after another: each has a ``--entries`` index (default
10,000) written into the bench's Redis by a writer process (the memory worker's
``RedisRecallIndex.upsert``, so the stored form is the real one), searched ``--searches``
times by the replica (the first search loads the whole index, as after a deploy), then
deleted from Redis: Redis holds at most ``WRITTEN_AHEAD`` + 1 users at once, the replica
keeps what its cache keeps. The writer runs in its own process, so what it allocates is not
the replica's.

The entries are synthetic but shaped like LongMemEval's haystack entries as the worker
makes them (measured on three of its development haystacks, 2,781 entries): text lengths
sampled from their distribution (10/25/50/75/90th percentiles 141/262/667/750/785
characters, mean 524, at most 800: a passage), 1 to 12 embeddings each (an entry's own
and its sentences', mean 5.7), ~168 keyword terms each (its own and its neighbours'),
embeddings of the real width (896: English in the first 384 columns, as the default model
writes them), in half precision as Redis stores them.

Printed: every ``--every`` users (and at the end) the replica's resident set (RSS, from
``/proc/self/statm``), the cache's own estimate of what it holds (``SnapshotCache.nbytes``),
the copies held, and RSS minus the RSS before the first user; at the end, the measured
constant: the final RSS minus the cache's byte budget. ``--malloc-trim`` returns freed
heap to the system after each user (glibc's ``malloc_trim(0)``: tells fragmentation from
growth).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import multiprocessing
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex, SnapshotCache
from llm_bot.adapters.script_embedder import DIMENSION, ENGLISH
from llm_bot.config.settings import Settings
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.search_query import SearchQuery
from tests.support.service_control import PrivateRedis

PREFIX = "llmbot-bench-replica"
TENANT = "bench"
MODEL = "all-MiniLM-L6-v2+use-multilingual"
WRITTEN_AHEAD = 2
"""Users the writer may have written that the replica has not served yet."""
LENGTHS = (60, 141, 262, 667, 750, 785, 800)
"""Text length at the 0/10/25/50/75/90/100th percentiles (LongMemEval haystack entries)."""
ROWS = (1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
ROW_COUNTS = (278, 437, 350, 296, 286, 356, 336, 245, 105, 51, 41)
"""Embeddings per entry, and how many of those 2,781 entries had that many (1: one
sentence; else its own and its sentences'; 12 stands for 12 or more)."""
TERMS_PER_CHAR = 168 / 524
"""Keyword terms (its own words' and its neighbours') per character of text."""
WRITE_BATCH = 500
PAGE = 4096


def rss() -> int:
    """This process's resident set, in bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    """The highest resident set this process had, in bytes (``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def held(replica: RedisRecallIndex) -> tuple[int, int]:
    """The cache's own estimate of the bytes it holds, and the users whose copies it holds
    (read from its private fields, which the code before and after has alike: an A/B)."""
    cache: SnapshotCache = replica._cache
    return cache.nbytes, len(cache._items)


def mb(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def vocabulary(seed: int) -> list[str]:
    """20,000 made-up words (3 to 10 letters)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(20_000)]


class Synthetic:
    """Entries shaped like LongMemEval's (see the module docstring), a user at a time."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(seed)
        vectors = np.random.default_rng(seed).standard_normal((65_536, ENGLISH)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = vectors.astype(np.float16)

    def length(self) -> int:
        step = self.rng.randrange(len(LENGTHS) - 1)
        low, high = LENGTHS[step], LENGTHS[step + 1]
        return self.rng.randint(low, high)

    def text(self, chars: int) -> str:
        words: list[str] = []
        size = 0
        while size < chars:
            word = self.rng.choice(self.words)
            words.append(word)
            size += len(word) + 1
        return " ".join(words)[:chars]

    def user(self, user: str, count: int) -> list[tuple[IndexEntry, np.ndarray]]:
        entries: list[tuple[IndexEntry, np.ndarray]] = []
        start = self.rng.randrange(len(self.vectors))
        for n in range(count):
            text = self.text(self.length())
            terms = tuple(
                self.rng.choice(self.words) for _ in range(int(TERMS_PER_CHAR * len(text)))
            )
            (rows,) = self.rng.choices(ROWS, weights=ROW_COUNTS)
            picked = np.take(self.vectors, range(start, start + rows), axis=0, mode="wrap")
            start += rows
            vectors = np.zeros((rows, DIMENSION), dtype=np.float16)
            vectors[:, :ENGLISH] = picked
            entry = IndexEntry(
                id=f"m|c{n // 500}|{user}-{n}",
                kind="message",
                text=text,
                speaker="user" if n % 2 == 0 else "assistant",
                date=f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T10:00:00+00:00",
                conversation_id=f"c{n // 500}",
                turn=n // 2 + 1,
                seq=n % 2,
                source_id=f"{user}-{n}",
                terms=terms,
                indexed_at=1_700_000_000.0,
                dating=False,
            )
            entries.append((entry, vectors))
        return entries


def writer(
    redis_url: str, entries: int, users: int, seed: int, ready: Queue[tuple[str, float]]
) -> None:
    """The memory worker's part, in a process of its own: each user's index written, then
    announced on ``ready`` (a bounded queue: at most ``WRITTEN_AHEAD`` ahead)."""

    async def run() -> None:
        client = aioredis.from_url(redis_url)
        index = RedisRecallIndex(
            client=client, keys=RedisKeys(prefix=PREFIX), ttl_seconds=86_400, cache_entries=0
        )
        synthetic = Synthetic(seed)
        for number in range(users):
            user = f"u{number:05d}"
            started = time.perf_counter()
            made = synthetic.user(user, entries)
            for first in range(0, len(made), WRITE_BATCH):
                await index.upsert(
                    TENANT, user, made[first : first + WRITE_BATCH], model=MODEL, erasure=""
                )
            del made
            await asyncio.to_thread(ready.put, (user, time.perf_counter() - started))
        await client.aclose()

    asyncio.run(run())


@dataclass
class Served:
    load_s: list[float]
    search_ms: list[float]
    write_s: list[float]


async def serve(args: argparse.Namespace, redis_url: str, ready: Queue[tuple[str, float]]) -> None:
    defaults = Settings.model_fields
    cache_entries = args.cache_entries or int(defaults["retrieval_cache_entries"].default)
    cache_mb = args.cache_mb or int(defaults["retrieval_cache_mb"].default)
    client = aioredis.from_url(redis_url)
    keys = RedisKeys(prefix=PREFIX)
    replica = RedisRecallIndex(
        client=client,
        keys=keys,
        ttl_seconds=86_400,
        cache_entries=cache_entries,
        cache_bytes=cache_mb * 2**20,
    )
    trim = ctypes.CDLL("libc.so.6").malloc_trim if args.malloc_trim else None
    rng = np.random.default_rng(7)
    words = vocabulary(args.seed)  # the entries' vocabulary: the searches match some
    served = Served([], [], [])
    before = rss()
    print(
        f"replica: cache bounds {cache_entries:,} embeddings and {cache_mb} MB; "
        f"{args.entries:,} entries per user; RSS before the first user {mb(before)} MB"
        + ("; malloc_trim(0) after each user" if trim else ""),
        flush=True,
    )
    print(
        "| users served | RSS MB | peak RSS MB | cache estimate MB | copies held "
        "| RSS - RSS before MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|", flush=True)
    started = time.perf_counter()
    for number in range(1, args.users + 1):
        user, write_s = await asyncio.to_thread(ready.get)
        served.write_s.append(write_s)
        for search in range(args.searches):
            vector = np.zeros(DIMENSION, dtype=np.float32)
            vector[:ENGLISH] = rng.standard_normal(ENGLISH)
            query = SearchQuery(
                vector=vector, terms=[words[int(i)] for i in rng.integers(0, len(words), 4)]
            )
            begun = time.perf_counter()
            await replica.search(TENANT, user, query, model=MODEL)
            took = time.perf_counter() - begun
            (served.load_s.append(took) if search == 0 else served.search_ms.append(took * 1000))
        parts = ("meta", "doc", "vec", "seq", "tomb")
        await client.unlink(*(keys.recall_index(TENANT, user, part) for part in parts))
        if trim is not None:
            trim(0)
        if number % args.every == 0 or number == args.users:
            estimate, copies = held(replica)
            print(
                f"| {number} | {mb(rss())} | {mb(peak_rss())} | {mb(estimate)} | {copies} | "
                f"{mb(rss() - before)} |",
                flush=True,
            )
    elapsed = time.perf_counter() - started
    final, (estimate, _) = rss(), held(replica)
    budget = cache_mb * 2**20
    print(
        f"\n{args.users} users in {elapsed / 60:.1f} min; first search (the load) p50 "
        f"{statistics.median(served.load_s):.2f} s, later searches p50 "
        f"{statistics.median(served.search_ms or [0.0]):.1f} ms; writing a user "
        f"{statistics.median(served.write_s):.1f} s (writer process)"
    )
    print(
        f"RSS before the first user {mb(before)} MB, final {mb(final)} MB (peak {mb(peak_rss())} MB); "
        f"final - before = {mb(final - before)} MB; cache estimate {mb(estimate)} MB "
        f"of a {cache_mb} MB budget"
    )
    print(
        f"measured constant (final RSS - cache budget) = {mb(final - budget)} MB; "
        f"RSS - cache estimate = {mb(final - estimate)} MB"
    )
    await client.aclose()


def main(args: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: its Redis goes too
    with tempfile.TemporaryDirectory(prefix="replica-memory-") as directory:
        redis = PrivateRedis(Path(directory))
        redis.start()
        context = multiprocessing.get_context("spawn")  # nothing of this process inherited
        ready: Queue[tuple[str, float]] = context.Queue(maxsize=WRITTEN_AHEAD)
        process = context.Process(
            target=writer, args=(redis.url, args.entries, args.users, args.seed, ready)
        )
        process.start()
        try:
            asyncio.run(serve(args, redis.url, ready))
        finally:
            process.terminate()
            process.join(timeout=10)
            redis.close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=10_000, help="index entries per user")
    parser.add_argument("--searches", type=int, default=3, help="searches per user")
    parser.add_argument("--every", type=int, default=50, help="print RSS every N users")
    parser.add_argument(
        "--cache-mb", type=int, default=0, help="LLM_BOT_RETRIEVAL_CACHE_MB (default: its default)"
    )
    parser.add_argument(
        "--cache-entries",
        type=int,
        default=0,
        help="LLM_BOT_RETRIEVAL_CACHE_ENTRIES (default: its default)",
    )
    parser.add_argument("--malloc-trim", action="store_true", help="malloc_trim(0) after each user")
    parser.add_argument("--seed", type=int, default=41)
    return parser.parse_args()


if __name__ == "__main__":
    main(parse_args())
