"""A bench user with a history: an index of synthetic chat messages, and what the reply
path's retrieval did while a bench ran.

``tests/bench/throughput.py`` runs its events as one user whose index holds
``--index-entries`` messages (1,000 by default), as a user with history does, rather than
an empty index (a search over nothing costs nothing). The entries are embedded with the
configured local model and written through the service's own index adapter, as the memory
worker writes them.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.adapters.script_embedder import local_embedder
from llm_bot.memory.recall_items import conversation_entries
from llm_bot.service.indexer import embed_entries
from tests.bench.retrieval_latency import history

TENANT = "bench"
BATCH = 256


async def fill_index(
    redis_url: str, key_prefix: str, user_id: str, entries: int, *, model: str | None = None
) -> float:
    """Write ``entries`` synthetic messages into the user's index at ``redis_url`` under
    ``key_prefix`` (in a conversation of their own: the bench's conversations recall
    them, none of them is in a window), embedded by the local ``model`` (default: the
    service's default); returns the seconds it took."""
    started = time.perf_counter()
    client = aioredis.from_url(redis_url)
    embedder = local_embedder(model)
    index = RedisRecallIndex(
        client=client,
        keys=RedisKeys(prefix=key_prefix),
        ttl_seconds=3600,
        cache_entries=1,
    )
    try:
        batch = conversation_entries(
            "history", history(entries, random.Random(entries)), indexed_at=time.time()
        )
        for start in range(0, len(batch), BATCH):
            embedded = await embed_entries(embedder, batch[start : start + BATCH])
            await index.upsert(TENANT, user_id, embedded, model=embedder.name, erasure="")
    finally:
        await embedder.aclose()
        await client.aclose()
    return time.perf_counter() - started


@dataclass(frozen=True)
class RetrievalOutcomes:
    """The reply path's searches during one phase, by outcome, and its timeouts by reason
    (``llmbot_retrieval_searches_total``, ``llmbot_retrieval_timeouts_total``)."""

    searches: Counter[str]
    timeouts: Counter[str]

    @classmethod
    def read(cls, registry: CollectorRegistry) -> RetrievalOutcomes:
        searches: Counter[str] = Counter()
        timeouts: Counter[str] = Counter()
        for metric in registry.collect():
            for sample in metric.samples:
                if sample.name == "llmbot_retrieval_searches_total":
                    searches[sample.labels["outcome"]] += int(sample.value)
                elif sample.name == "llmbot_retrieval_timeouts_total":
                    timeouts[sample.labels["reason"]] += int(sample.value)
        return cls(searches, timeouts)

    def summary(self) -> str:
        total = self.searches.total()
        timed_out = self.searches["timeout"]
        share = f"{100 * timed_out / total:.2f}%" if total else "-"
        outcomes = ", ".join(f"{k} {v}" for k, v in self.searches.most_common())
        reasons = ", ".join(f"{k} {v}" for k, v in self.timeouts.most_common()) or "none"
        return f"{timed_out} of {total} timed out ({share}; {reasons}); outcomes: {outcomes}"
