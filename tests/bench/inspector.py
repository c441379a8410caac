"""What the memory inspector costs: server time of a user's page and of a "why" dry run for
a big user (issue 29: 10,000 index entries and 500 facts; page p95 <= 150 ms, why p95 <= 60
ms).

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.inspector --requests 60

The user is written straight through the adapters (the index with the local model's name
and 384-dimension vectors, so the dense path of the search runs; 500 facts in long-term
memory; a conversation of a few turns), then the inspector's app is called in this process
over ASGI (``httpx.ASGITransport``: no network, the time is the server's), logged in with a
key of its own. Each request is timed alone, one after another; the first of each kind
(the index's first load into the process) is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from llm_bot.adapters.script_embedder import DIMENSION, MODEL_NAME
from llm_bot.bootstrap import long_term_store, progress_store, recall_index, redis_client
from llm_bot.config import Settings
from llm_bot.delivery.process_tuning import SERVING_TUNING
from llm_bot.gateway.api_keys import key_digest
from llm_bot.logs import configure_logging
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import SemanticFact, Source
from tests.bench.index_resync import synthetic_entry
from tests.bench.throughput import remove_keys
from tests.support.events import new_id
from tests.support.harness import settings_for_test
from tests.support.inspector import client_for, inspector_for, login
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

KEY = "sk-bench-inspector-0123456789"
TOPICS = ("garden", "trip", "invoice", "Chiang Mai", "piano", "refund", "birthday", "bike")


def _vector(n: int) -> np.ndarray:
    row = np.random.default_rng(n).standard_normal(DIMENSION).astype(np.float32)
    return (row / np.linalg.norm(row)).reshape(1, -1)


def _fact(n: int, now: str) -> SemanticFact:
    return SemanticFact(
        id=f"f{n}",
        fact=f"The user likes the {TOPICS[n % len(TOPICS)]} number {n}.",
        confidence=0.9,
        salience=0.5,
        sources=(Source(conversation_id=f"c{n % 10}", turns=(n % 50 + 1,)),),
        created_at=now,
        updated_at=now,
    )


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000


def inspector_settings(urls: ServiceUrls, **overrides: Any) -> Settings:
    """The inspector's settings: its key, room for the big user's facts, no model."""
    return settings_for_test(
        urls,
        "http://127.0.0.1:9/v1",
        inspector_keys=f"*={key_digest(KEY)}",
        ltm_max_items=1000,
        retrieval_timeout_ms=5000,
        log_level="warning",
        **overrides,
    )


async def seed_big_user(settings: Settings, *, entries: int, facts: int) -> ConversationKey:
    """A user with ``entries`` index entries and ``facts`` facts, written through the
    adapters; the key of one of its conversations."""
    tenant, user = "tbench", new_id("u")
    key = ConversationKey(tenant, user, new_id("c"))
    client = redis_client(settings.redis)
    try:
        index = recall_index(settings, client)
        for start in range(0, entries, 1000):
            rows = [
                (synthetic_entry(n), _vector(n)) for n in range(start, min(start + 1000, entries))
            ]
            await index.upsert(tenant, user, rows, model=MODEL_NAME, erasure="")
        now = datetime.now(UTC).isoformat()
        written = [_fact(n, now) for n in range(facts)]
        await long_term_store(settings, client).write(tenant, user, erasure="", facts=written)
        # A user with memory has a key registry (every reply and job writes it): a done job's
        # marker makes one, so the page lists conversations as it does for a real user.
        await progress_store(settings, client).mark_job_done(tenant, user, "job_seed", erasure="")
    finally:
        await client.aclose()
    print(f"seeded {entries} index entries and {facts} facts", flush=True)
    return key


def page_paths(key: ConversationKey) -> dict[str, str]:
    """The two pages timed: the user's page and a "why" dry run in one conversation."""
    user = f"/t/{key.tenant_id}/u/{key.user_id}"
    return {
        "user page": user,
        "why": f"{user}/c/{key.conversation_id}/why?message=what+about+the+garden",
    }


async def run(args: argparse.Namespace) -> int:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    settings = inspector_settings(urls)
    key = await seed_big_user(settings, entries=args.entries, facts=args.facts)
    paths = page_paths(key)
    status = 0
    SERVING_TUNING.hold()  # as ``llm-bot inspect`` serves (``inspector/serve.py``)
    async with inspector_for(settings) as inspector, client_for(inspector) as http:
        assert (await login(http, KEY)).status_code in (200, 303)
        for name, path in paths.items():
            timings = []
            for _ in range(args.requests + 1):
                started = time.perf_counter()
                response = await http.get(path)
                timings.append(time.perf_counter() - started)
                assert response.status_code == 200, (name, response.status_code)
            first, rest = timings[0], timings[1:]
            target = 150 if name == "user page" else 60
            p95 = _p(rest, 95)
            ok = p95 <= target
            status |= 0 if ok else 1
            print(
                f"{name}: first {first * 1000:.0f} ms; then p50 {_p(rest, 50):.1f} ms, "
                f"p95 {p95:.1f} ms (target {target} ms: {'met' if ok else 'MISSED'}), "
                f"n={len(rest)}",
                flush=True,
            )
    print(f"removed {await remove_keys(urls.redis_url)} Redis keys of this run")
    return status


def _quiet() -> None:
    """Warnings only: the debug lines of every dry run would time the console."""
    configure_logging(level="warning", fmt="json")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=500)
    parser.add_argument("--requests", type=int, default=60, help="timed requests of each kind")
    _quiet()
    raise SystemExit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
