"""Memory formation's indexing path alone, model against model in one run (issue 41).

Run by hand (not part of ``make test``), with the dataset at a path you give (MIT license;
never committed here), on a redis-server of its own (started on a free port, stopped at
the end)::

    .venv/bin/python -m tests.bench.formation --data ../shared/data/longmemeval/dev.json \\
        --questions 2 --models all-MiniLM-L6-v2+use-multilingual-v3 \\
        all-MiniLM-L6-v2-static+use-multilingual-v3

Each session of the first ``--questions`` LongMemEval haystacks is indexed as the memory
worker indexes a conversation (``Indexer._write``'s steps): its messages become entries
(``conversation_entries``), the entries are embedded in batches of ``EMBED_BATCH``
(``embed_entries``, the model's ``LocalEmbedder``: passages split across one thread per
core, coalesced across jobs) and written to the user's index (``RedisRecallIndex.upsert``).
Up to ``--jobs`` sessions run at once (the worker's 8 jobs in flight). Each model runs
``--rounds`` times, the models alternated, each round a new user. Printed per model and
round: messages per second (wall clock, entries to index write), CPU ms per message (all
of the process's threads), and the breakdown on one thread, measured apart on the same
texts: building the entries, tokenizing, inference (the rest of the model's ``encode``:
the transformer, or the static table's look-up and sums) and the index write (the client's
JSON, packing and script call: its CPU, and the wall clock with Redis's part).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from llm_bot.adapters import local_embedder as english_model
from llm_bot.adapters import static_model
from llm_bot.adapters.local_embedder import LocalEmbedder
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.adapters.script_embedder import local_embedder
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_items import IndexEntry, conversation_entries
from llm_bot.service.indexer import EMBED_BATCH, embed_entries
from tests.bench.longmemeval_ranking import session_messages
from tests.bench.longmemeval_scoring import Question, questions
from tests.support.processes import free_port

TENANT = "formation"


def sessions_of(question: Question) -> list[tuple[str, list[ChatMessage]]]:
    """Each session as a conversation's messages, as ``longmemeval_ranking`` builds them
    (blank turns left out)."""
    return [
        (
            f"{question.id}-{session.id}",
            [m for m in session_messages(session) if m.content.strip()],
        )
        for session in question.sessions
    ]


def process_cpu() -> float:
    return time.process_time()


async def index_all(
    embedder: LocalEmbedder,
    index: RedisRecallIndex,
    user: str,
    sessions: Sequence[tuple[str, list[ChatMessage]]],
    jobs: int,
) -> tuple[float, float]:
    """Every session indexed, ``jobs`` at once; (wall seconds, process CPU seconds)."""
    slots = asyncio.Semaphore(jobs)

    async def one(conversation: str, messages: list[ChatMessage]) -> None:
        async with slots:
            entries = conversation_entries(conversation, messages, indexed_at=time.time())
            for start in range(0, len(entries), EMBED_BATCH):
                embedded = await embed_entries(embedder, entries[start : start + EMBED_BATCH])
                await index.upsert(TENANT, user, embedded, model=embedder.name, erasure="")

    started, cpu = time.perf_counter(), process_cpu()
    await asyncio.gather(*(one(c, m) for c, m in sessions))
    return time.perf_counter() - started, process_cpu() - cpu


def english_encoder(model: str) -> Any:
    """The English block's ``encode`` of ``model`` (what the breakdown times)."""
    return static_model.encode if "static" in model else english_model.encode


async def breakdown(
    model: str,
    embedder: LocalEmbedder,
    index: RedisRecallIndex,
    user: str,
    sessions: Sequence[tuple[str, list[ChatMessage]]],
) -> dict[str, float]:
    """CPU seconds of each step, on this thread, for all ``sessions``."""
    clock = time.thread_time
    started = clock()
    entries: list[IndexEntry] = [
        e for c, m in sessions for e in conversation_entries(c, m, indexed_at=time.time())
    ]
    built = clock() - started
    texts = [t for e in entries for t in (e.embedding_texts[1:] or e.embedding_texts)]
    _, tokenizer = english_model.load_model()
    started = clock()
    tokenizer.encode_batch(texts)
    tokenized = clock() - started
    encode = english_encoder(model)
    started = clock()
    for start in range(0, len(texts), 256):
        encode(texts[start : start + 256])
    encoded = clock() - started
    embedded = [
        pair
        for start in range(0, len(entries), EMBED_BATCH)
        for pair in await embed_entries(embedder, entries[start : start + EMBED_BATCH])
    ]
    started, wall = clock(), time.perf_counter()
    for start in range(0, len(embedded), EMBED_BATCH):
        await index.upsert(
            TENANT, user, embedded[start : start + EMBED_BATCH], model=embedder.name, erasure=""
        )
    return {
        "entries": built,
        "tokenize": tokenized,
        "inference": max(0.0, encoded - tokenized),
        "write": clock() - started,
        "write wall": time.perf_counter() - wall,
        "texts": len(texts),
    }


def redis_server(port: int, folder: str) -> subprocess.Popen[bytes]:
    """A redis-server of the bench's own, without persistence."""
    return subprocess.Popen(  # noqa: S603  # our own redis-server, on a free port
        [
            shutil.which("redis-server") or "redis-server",
            *("--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder),
        ],
        stdout=subprocess.DEVNULL,
    )


async def run(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    selected = list(questions(data))[: args.questions]
    sessions = [s for q in selected for s in sessions_of(q)]
    messages = sum(len(m) for _, m in sessions)
    print(f"{len(selected)} haystacks, {len(sessions)} sessions, {messages} messages")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="formation-redis-")
    server = redis_server(port, folder)
    try:
        client = aioredis.Redis(port=port)
        for _ in range(100):
            try:
                await client.ping()
                break
            except (ConnectionError, aioredis.ConnectionError):
                await asyncio.sleep(0.05)
        index = RedisRecallIndex(
            client=client, keys=RedisKeys(prefix="bench"), ttl_seconds=3600, cache_entries=1
        )
        embedders = {model: local_embedder(model) for model in args.models}
        rates: dict[str, list[tuple[float, float]]] = {model: [] for model in args.models}
        for round_ in range(1, args.rounds + 1):
            for model, embedder in embedders.items():
                user = f"u{round_}-{len(rates[model])}-{abs(hash(model)) % 10**6}"
                wall, cpu = await index_all(embedder, index, user, sessions, args.jobs)
                rates[model].append((messages / wall, 1000 * cpu / messages))
                sample = sessions[: args.breakdown_sessions]
                counted = sum(len(m) for _, m in sample)
                parts = await breakdown(model, embedder, index, f"{user}-b", sample)
                split = ", ".join(
                    f"{name} {1000 * value / counted:.2f}"
                    for name, value in parts.items()
                    if name != "texts"
                )
                print(
                    f"round {round_} {model}: {messages / wall:.1f} messages/s, "
                    f"{1000 * cpu / messages:.1f} ms CPU per message; one thread, ms per "
                    f"message: {split} ({parts['texts'] / counted:.1f} texts per message)",
                    flush=True,
                )
        print("\n| model | messages/s (each round) | CPU ms per message (each round) |")
        print("|---|---|---|")
        for model, runs in rates.items():
            print(
                f"| {model} | {' / '.join(f'{r:.1f}' for r, _ in runs)} | "
                f"{' / '.join(f'{c:.1f}' for _, c in runs)} |"
            )
        for embedder in embedders.values():
            await embedder.aclose()
        await client.aclose()
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LongMemEval JSON (e.g. dev.json)")
    parser.add_argument("--questions", type=int, default=1, help="first N haystacks")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=8, help="sessions indexed at once")
    parser.add_argument(
        "--breakdown-sessions", type=int, default=10, help="sessions the breakdown times"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        default=[
            "all-MiniLM-L6-v2+use-multilingual-v3",
            "all-MiniLM-L6-v2-static+use-multilingual-v3",
        ],
        help="LLM_BOT_EMBEDDING_MODEL values, alternated",
    )
    return parser.parse_args()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the redis-server stops too
    arguments = parse_args()
    asyncio.run(run(arguments, json.loads(Path(arguments.data).read_text())))
