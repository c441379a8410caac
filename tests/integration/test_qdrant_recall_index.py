"""What only the Qdrant index has to get right beyond the contract: an erasure that starts
while it writes (it cannot check the mark atomically), Qdrant failures as
``MemoryUnavailable``, and the factory behind ``QDRANT_URL``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis
from qdrant_client import AsyncQdrantClient
from qdrant_client.http.models import models as qm

from llm_bot.adapters.qdrant_points import COLLECTION
from llm_bot.adapters.qdrant_recall_index import QdrantRecallIndex
from llm_bot.adapters.redis_erasure import ErasureMarks
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import recall_index
from llm_bot.config import Settings
from llm_bot.errors import ErasedMeanwhile, MemoryUnavailable
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.search_query import SearchQuery
from tests.support.embeddings import DIMENSION, hashed_vector, hashed_vectors
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
]

KEYS = RedisKeys(prefix=TEST_KEY_PREFIX)
ENTRY = IndexEntry(
    id="m:c1:e1",
    kind="message",
    text="I adopted a cat named Biscuit",
    speaker="Caroline",
    date="2023-05-08T10:00:00+00:00",
    conversation_id="c1",
    turn=1,
    seq=0,
    source_id="e1",
    terms=tuple(keyword_terms("Caroline I adopted a cat named Biscuit")),
)


class ErasingClient(AsyncQdrantClient):
    """Runs ``before_upsert`` (an erasure starting) just before each upsert lands."""

    before_upsert: Callable[[], Any] | None = None

    async def upsert(self, *args: Any, **kwargs: Any) -> Any:
        if self.before_upsert is not None:
            await self.before_upsert()
        return await super().upsert(*args, **kwargs)


@pytest.fixture
async def redis_client(service_urls: ServiceUrls) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(service_urls.redis_url)
    yield client
    await client.aclose()


async def test_erasure_starting_during_the_write_takes_the_write_back(
    redis_client: aioredis.Redis,
) -> None:
    """The mark changed between the check before and the check after: nothing stays."""
    client = ErasingClient(location=":memory:")
    index = QdrantRecallIndex(client=client, redis=redis_client, keys=KEYS)
    tenant, user = new_id("t"), new_id("u")
    marks = ErasureMarks(client=redis_client, keys=KEYS)

    async def erasure_begins() -> None:
        await marks.begin(tenant, user)

    client.before_upsert = erasure_begins
    with pytest.raises(ErasedMeanwhile):
        await index.upsert(
            tenant, user, [(ENTRY, hashed_vector(ENTRY.text))], model="m", erasure=""
        )
    assert await index.count(tenant, user) == 0
    await index.aclose()


async def test_qdrant_failures_are_memory_unavailable(redis_client: aioredis.Redis) -> None:
    """A Qdrant that cannot be reached fails reads and writes as retryable MemoryUnavailable."""
    client = AsyncQdrantClient(url="http://127.0.0.1:9", timeout=1, check_compatibility=False)
    index = QdrantRecallIndex(client=client, redis=redis_client, keys=KEYS)
    tenant, user = new_id("t"), new_id("u")
    with pytest.raises(MemoryUnavailable):
        await index.search(tenant, user, SearchQuery(vector=None, terms=["cat"]), model="m")
    with pytest.raises(MemoryUnavailable):
        await index.upsert(
            tenant, user, [(ENTRY, hashed_vector(ENTRY.text))], model="m", erasure=""
        )
    with pytest.raises(MemoryUnavailable):
        await index.forget_user(tenant, user)
    await index.aclose()


async def test_qdrant_url_selects_the_qdrant_index(
    make_settings: Callable[..., Settings], redis_client: aioredis.Redis
) -> None:
    """With QDRANT_URL set the wiring builds the Qdrant index, without connecting."""
    settings = make_settings(qdrant_url="https://127.0.0.1:9", qdrant_api_key="secret")
    index = recall_index(settings, redis_client)
    assert isinstance(index, QdrantRecallIndex)
    await index.aclose()


CAMPING = replace(ENTRY, text="We went camping. The kids watched the meteor shower.")


async def camping_found_by(
    client: AsyncQdrantClient, redis_client: aioredis.Redis, row: int
) -> list[str]:
    """Write CAMPING (its own embedding and two sentences') for a new user; the ids a dense
    search (no keywords, minimum 0.99) for its embedding ``row`` finds."""
    index = QdrantRecallIndex(client=client, redis=redis_client, keys=KEYS)
    tenant, user = new_id("t"), new_id("u")
    vectors = hashed_vectors(CAMPING)
    assert len(vectors) == 3
    assert await index.upsert(tenant, user, [(CAMPING, vectors)], model="m", erasure="") == 1
    dense_only = SearchQuery(vector=vectors[row], terms=[], min_score=0.99)
    return [h.entry.id for h in await index.search(tenant, user, dense_only, model="m")]


async def test_a_collection_of_single_vectors_keeps_working(redis_client: aioredis.Redis) -> None:
    """A collection created before entries had sentence embeddings (one vector per point)
    is used as it is: entries get their own embedding only, found and compared by it."""
    client = AsyncQdrantClient(location=":memory:")
    await client.create_collection(
        COLLECTION, qm.VectorParams(size=DIMENSION, distance=qm.Distance.COSINE)
    )
    assert await camping_found_by(client, redis_client, 0) == [CAMPING.id]
    assert await camping_found_by(client, redis_client, 2) == []
    await client.close()


async def test_a_new_collection_compares_every_embedding_of_a_point(
    redis_client: aioredis.Redis,
) -> None:
    """Created by the first write: several vectors per point, compared by their best."""
    client = AsyncQdrantClient(location=":memory:")
    assert await camping_found_by(client, redis_client, 2) == [CAMPING.id]
    params = (await client.get_collection(COLLECTION)).config.params.vectors
    assert isinstance(params, qm.VectorParams)
    assert params.multivector_config is not None
    await client.close()
