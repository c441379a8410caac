"""A big index loads page by page, never in one piece, and a search has a time budget
(adapters/redis_recall_index.py, service/retriever.py; SPEC 5.7)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters import redis_recall_index
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import LOAD_PAGE, RedisRecallIndex
from llm_bot.memory import recall_items
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.time_expressions import mentions_time
from llm_bot.service.retriever import PreparedQuery, RetrievalSettings, Retriever
from llm_bot.telemetry.metrics import Metrics
from tests.integration.test_recall_index_contract import MODEL, entry, query
from tests.support.embeddings import hashed_vector, hashed_vectors
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

ENTRIES = LOAD_PAGE * 4 + 7


@pytest.fixture
async def client(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.from_url(service_urls.redis_url)
    yield redis
    await redis.aclose()


def _index(client: aioredis.Redis) -> RedisRecallIndex:
    return RedisRecallIndex(
        client=client, keys=RedisKeys(prefix=TEST_KEY_PREFIX), ttl_seconds=3600, cache_entries=10**6
    )


async def _fill(index: RedisRecallIndex, tenant: str, user: str, count: int) -> None:
    entries = [entry(f"m|c1|e{n}", f"note number {n} about topic{n}") for n in range(count)]
    for start in range(0, count, 500):
        chunk = entries[start : start + 500]
        await index.upsert(
            tenant, user, [(e, hashed_vectors(e)) for e in chunk], model=MODEL, erasure=""
        )


async def test_a_big_index_loads_in_pages_and_every_entry_is_found(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading yields to the event loop between pages of LOAD_PAGE entries; the first and
    the last entry written are both found; a removal is caught up with incrementally (a
    tombstone), no reload."""
    tenant, user = new_id("t"), new_id("u")
    await _fill(_index(client), tenant, user, ENTRIES)
    index = _index(client)  # a process that has not searched this user yet
    pages = 0
    sleep = asyncio.sleep

    async def counting_sleep(delay: float) -> None:
        nonlocal pages
        pages += 1
        await sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", counting_sleep)  # as the index sees it
    first = await index.search(tenant, user, query("topic0"), model=MODEL)
    last = await index.search(tenant, user, query(f"topic{ENTRIES - 1}"), model=MODEL)
    assert first[0].entry.id == "m|c1|e0"
    assert last[0].entry.id == f"m|c1|e{ENTRIES - 1}"
    assert pages == ENTRIES // LOAD_PAGE
    assert await index.remove(tenant, user, ["m|c1|e0"]) == 1
    again = await index.search(tenant, user, query("topic0"), model=MODEL)
    assert "m|c1|e0" not in [hit.entry.id for hit in again]
    assert pages == ENTRIES // LOAD_PAGE
    assert await index.count(tenant, user) == ENTRIES - 1


def keyword_retriever(
    index: RedisRecallIndex,
    *,
    search_budget: float,
    load_budget: float,
    registry: CollectorRegistry | None = None,
) -> Retriever:
    """A retriever without embeddings (keyword search) with these time budgets (seconds)."""
    return Retriever(
        embedder=None,
        index=index,
        settings=RetrievalSettings(
            min_score=0.0,
            topic_similarity=0.99,
            max_items=5,
            timeout_seconds=search_budget,
            load_timeout_seconds=load_budget,
        ),
        metrics=Metrics(registry=registry or CollectorRegistry()),
        tracer=TracerProvider().get_tracer("test"),
    )


async def test_a_search_past_its_budget_goes_on_without_recall_and_the_load_finishes(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 ms budget (loading included) against an index that takes longer to load in
    one page (no progress to see within the budget): outcome ``timeout`` (the reply goes
    on), and the load completes in the background for the next search."""
    monkeypatch.setattr(redis_recall_index, "LOAD_PAGE", ENTRIES + 1)
    tenant, user = new_id("t"), new_id("u")
    index = _index(client)
    await _fill(index, tenant, user, ENTRIES)
    fresh = _index(client)
    registry = CollectorRegistry()
    retriever = keyword_retriever(fresh, search_budget=0.001, load_budget=0.001, registry=registry)
    key = ConversationKey(tenant, user, "c9")
    started = time.perf_counter()
    result = await retriever.retrieve(PreparedQuery("topic7", None), key, exclude=(), topic=None)
    assert result.outcome == "timeout"
    assert result.records == ()
    assert time.perf_counter() - started < 0.5
    async with asyncio.timeout(30):  # the load goes on without any search waiting
        while (
            await fresh.search(
                tenant, user, query("topic7", vector=hashed_vector("topic7")), model=MODEL
            )
        ) == []:
            await asyncio.sleep(0.01)
    timeouts = registry.get_sample_value("llmbot_retrieval_searches_total", {"outcome": "timeout"})
    assert timeouts == 1


async def test_a_load_slower_than_the_budget_is_waited_for_while_it_progresses(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy replica a load takes longer than the load budget as a whole, page after
    page: the search waits for it while pages arrive, and recalls (a budget of whole loads
    timed it out: the first searches of a saturated replica answered without memory)."""
    tenant, user = new_id("t"), new_id("u")
    await _fill(_index(client), tenant, user, ENTRIES)
    fresh = _index(client)
    sleep = asyncio.sleep

    async def slow_turn(delay: float) -> None:  # each page waits 40 ms for the loop
        await sleep(max(delay, 0.04))

    monkeypatch.setattr(asyncio, "sleep", slow_turn)  # as the index sees it
    registry = CollectorRegistry()
    retriever = keyword_retriever(fresh, search_budget=0.001, load_budget=0.1, registry=registry)
    started = time.perf_counter()
    result = await retriever.retrieve(
        PreparedQuery("topic7", None), ConversationKey(tenant, user, "c9"), exclude=(), topic=None
    )
    assert time.perf_counter() - started > 0.1  # longer than one budget: 4 pages' waits
    assert result.outcome == "searched"
    assert "m|c1|e7" in [record.id for record in result.records]
    assert registry.get_sample_value(
        "llmbot_retrieval_timeouts_total", {"reason": "index_load"}
    ) in (
        None,
        0,
    )


async def test_a_copy_older_than_the_kept_tombstones_loads_the_index_again(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the latest removals are kept as tombstones: a copy that missed trimmed ones
    loads the whole index again, and no removed entry survives in it."""
    monkeypatch.setattr(redis_recall_index, "TOMBSTONES_KEPT", 2)
    tenant, user = new_id("t"), new_id("u")
    writer, reader = _index(client), _index(client)
    await _fill(writer, tenant, user, 10)
    assert len(await reader.search(tenant, user, query("topic1"), model=MODEL)) > 0
    assert await writer.remove(tenant, user, ["m|c1|e1", "m|c1|e2", "m|c1|e3"]) == 3
    found = {
        hit.entry.id
        for text in ("topic1", "topic2", "topic3", "topic4")
        for hit in await reader.search(tenant, user, query(text), model=MODEL)
    }
    assert found.isdisjoint({"m|c1|e1", "m|c1|e2", "m|c1|e3"})
    assert "m|c1|e4" in found


async def test_a_first_search_waits_for_the_load_within_its_own_budget(
    client: aioredis.Redis,
) -> None:
    """A process's first search of a user loads the index: it gets the load's budget
    (``LLM_BOT_RETRIEVAL_LOAD_TIMEOUT_MS``), not the search's, and recalls; once loaded,
    a search whose refresh does not come back within the search's budget searches the
    copy as it stands: it recalls, never nothing."""
    tenant, user = new_id("t"), new_id("u")
    await _fill(_index(client), tenant, user, ENTRIES)
    fresh = _index(client)  # a process that has not searched this user yet (a deploy)
    # no search fits in a microsecond: only the load's budget can
    retriever = keyword_retriever(fresh, search_budget=0.000_001, load_budget=30)
    key = ConversationKey(tenant, user, "c9")
    assert not fresh.loaded(tenant, user)
    first = await retriever.retrieve(PreparedQuery("topic7", None), key, exclude=(), topic=None)
    assert first.outcome == "searched"
    assert "m|c1|e7" in [record.id for record in first.records]
    assert fresh.loaded(tenant, user)
    again = await retriever.retrieve(PreparedQuery("topic7", None), key, exclude=(), topic=None)
    assert again.outcome == "searched"
    assert "m|c1|e7" in [record.id for record in again.records]


async def test_a_copy_whose_refresh_comes_late_is_searched_as_it_stands(
    client: aioredis.Redis,
) -> None:
    """A search that may not wait for the copy's refresh (``fresh_within``) searches the
    copy as it was, counted (``on_behind``); the refresh goes on, and the next search
    finds what was written meanwhile."""
    tenant, user = new_id("t"), new_id("u")
    writer = _index(client)
    await _fill(writer, tenant, user, 20)
    behind: list[int] = []
    reader = RedisRecallIndex(
        client=client,
        keys=RedisKeys(prefix=TEST_KEY_PREFIX),
        ttl_seconds=3600,
        cache_entries=10**6,
        on_behind=lambda: behind.append(1),
    )
    assert await reader.search(tenant, user, query("topic3"), model=MODEL)  # the copy loads
    late = entry("m|c2|e1", "the parrot Mango talks")
    await writer.upsert(tenant, user, [(late, hashed_vectors(late))], model=MODEL, erasure="")
    stale = await reader.search(tenant, user, query("parrot Mango"), model=MODEL, fresh_within=0)
    assert "m|c2|e1" not in [hit.entry.id for hit in stale]
    assert behind == [1]
    fresh = await reader.search(tenant, user, query("parrot Mango"), model=MODEL)
    assert [hit.entry.id for hit in fresh][:1] == ["m|c2|e1"]


async def test_loads_of_several_users_run_one_at_a_time_each_with_its_own_budget(
    client: aioredis.Redis,
) -> None:
    """Users loading at once (a deploy) are loaded one at a time, and a search waiting
    behind others' loads times out only when none finishes within its budget: every
    first search recalls, and each load is counted as finished."""
    users = [new_id("u") for _ in range(4)]
    tenant = new_id("t")
    for user in users:
        await _fill(_index(client), tenant, user, LOAD_PAGE * 2)
    fresh = _index(client)
    retriever = keyword_retriever(fresh, search_budget=0.000_001, load_budget=5)
    results = await asyncio.gather(
        *(
            retriever.retrieve(
                PreparedQuery("topic7", None),
                ConversationKey(tenant, user, "c9"),
                exclude=(),
                topic=None,
            )
            for user in users
        )
    )
    assert [result.outcome for result in results] == ["searched"] * 4
    assert all("m|c1|e7" in [r.id for r in result.records] for result in results)
    assert fresh.load_progress() == 4 * 3  # 2 pages and the end of each load


async def test_a_load_reads_whether_an_entry_says_when_from_the_index_not_its_text(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether an entry's text says when (what a when-question favours) is stored with it
    when it is written; a process loading the index reads that, not every text again
    (the time expressions cost ~0.3 ms for a long message: most of a cold load). An entry
    stored without it (written before it was stored) is read from its text."""
    tenant, user = new_id("t"), new_id("u")
    dated = entry("m|c1|e1", "We went hiking in the hills yesterday")
    undated = entry("m|c1|e2", "Hiking in the hills is my favourite thing")
    older = entry("m|c1|e3", "I went hiking with Mel two weeks ago")
    writer = _index(client)
    await writer.upsert(
        tenant, user, [(e, hashed_vectors(e)) for e in (dated, undated)], model=MODEL, erasure=""
    )
    real_json = redis_recall_index.entry_json
    monkeypatch.setattr(  # as an entry written before the flag was stored
        redis_recall_index,
        "entry_json",
        lambda e, vectors=1: json.dumps(
            {k: v for k, v in json.loads(real_json(e, vectors)).items() if k != "tm"}
        ),
    )
    await writer.upsert(tenant, user, [(older, hashed_vectors(older))], model=MODEL, erasure="")
    monkeypatch.undo()
    read: list[str] = []

    def reading(text: str) -> bool:
        read.append(text)
        return mentions_time(text)

    monkeypatch.setattr(recall_items, "mentions_time", reading)
    asked = query("When did I go hiking in the hills?", vector=None, asks_when=True)
    hits = await _index(client).search(tenant, user, asked, model=MODEL)
    assert read == [older.text]
    by_id = {hit.entry.id: hit.entry for hit in hits}
    assert by_id[dated.id].dating is True
    assert by_id[undated.id].dating is False
    assert by_id[older.id].dating is None
    assert by_id[older.id].says_when
    assert hits[0].entry.id in (dated.id, older.id)
