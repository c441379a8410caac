"""The retrieval index in Qdrant (SPEC 5.7): the scale path behind ``QDRANT_URL``.

One collection (``llmbot_recall``, created with the size of the first vectors written,
cosine) holds every user's entries, one point each with the entry's embeddings (its own
and its sentences', compared by the best: ``qdrant_points.py``); every request is filtered
by tenant and user.

Search (``qdrant_search.py``) ranks as ``RedisRecallIndex`` does, with the same pieces, but the
vectors stay in Qdrant: its cosine search over the user's points of the query's model (at
or above the minimum, exclusions filtered out) is the dense ranking. The keyword ranking
is BM25 here over the user's points holding any query term (their terms fetched, nothing
else); the user's entry count and average length come from a facet over ``doc_length``,
so the statistics are the user's own, as in Redis. The two are fused by the same RRF, and
texts and vectors are fetched for the head of the fused ranking only, as far as the
near-duplicate collapse reads. (A term every entry holds, the speaker's name, makes the
keyword fetch read every entry's terms: the price of exact per-user BM25.)

Qdrant cannot check the user's erasure mark inside a write as the Redis scripts do: a write
reads the generation before and after writing, and when it changed (or the second read
failed) deletes what it wrote and raises; the job runs again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.http.exceptions import ApiException
from qdrant_client.http.models import models as qm

from llm_bot.adapters.qdrant_points import (
    COLLECTION,
    Collection,
    entry_of,
    field_is,
    has_id,
    of_user,
    payload,
    point_id,
)
from llm_bot.adapters.qdrant_search import QdrantSearch
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_erasure import current_generation
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import RedisConfig, RetrievalConfig
from llm_bot.errors import ErasedMeanwhile, IndexModelMismatch, MemoryUnavailable
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.recall_items import SEPARATOR, IndexEntry, SearchHit
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector, unit_rows

_FAILURES = (ApiException, QdrantException, httpx.HTTPError)


@contextlib.contextmanager
def _translated(action: str) -> Iterator[None]:
    try:
        yield
    except _FAILURES as exc:
        raise MemoryUnavailable(f"qdrant index {action} failed: {type(exc).__name__}") from exc


@redis_failures_retryable
class QdrantRecallIndex:
    """The ``RecallIndex`` port on Qdrant; erasure marks are read from Redis."""

    def __init__(
        self,
        *,
        client: AsyncQdrantClient,
        redis: RedisClient,
        keys: RedisKeys,
        collection: str = COLLECTION,
    ) -> None:
        self._points = Collection(client, collection)
        self._client = client
        self._name = collection
        self._redis = redis
        self._keys = keys
        self._searching = QdrantSearch(self._points)

    async def aclose(self) -> None:
        await self._client.close()

    async def upsert(
        self,
        tenant_id: str,
        user_id: str,
        entries: Sequence[tuple[IndexEntry, Vector]],
        *,
        model: str,
        erasure: str,
    ) -> int:
        if not entries:
            return 0
        await self._check_mark(tenant_id, user_id, erasure)
        latest = {point_id(tenant_id, user_id, e.id): (e, unit_rows(v)) for e, v in entries}
        with _translated("write"):
            size = await self._points.prepare(next(iter(latest.values()))[1].shape[1])
            if any(vectors.shape[1] != size for _, vectors in latest.values()):
                raise IndexModelMismatch("the index holds vectors of another size (reindex)")
            other = of_user(tenant_id, user_id, must_not=[field_is("model", model)])
            if (await self._client.scroll(self._name, other, limit=1, with_payload=False))[0]:
                raise IndexModelMismatch(
                    "the user's index holds another embedding model's vectors (llm-bot memory reindex)"
                )
            mine = of_user(tenant_id, user_id, has_id([*latest]))
            stored = await self._points.scroll(mine, fields=["digest"])
            digests = {str(r.id): (r.payload or {}).get("digest") for r in stored}
            changed = [p for p, (e, _) in latest.items() if digests.get(p) != e.digest]
            if not changed:
                return 0
            points = [
                qm.PointStruct(
                    id=p,
                    vector=self._points.point_vector(latest[p][1]),
                    payload=payload(tenant_id, user_id, latest[p][0], model),
                )
                for p in changed
            ]
            try:
                await self._client.upsert(self._name, points, wait=True)
                await self._check_mark(tenant_id, user_id, erasure)
            except Exception:
                # maybe written after an erasure's delete: take it back, the job writes again
                with contextlib.suppress(*_FAILURES):
                    await self._points.delete(of_user(tenant_id, user_id, has_id(changed)))
                raise
        return len(changed)

    async def digests(self, tenant_id: str, user_id: str, prefix: str) -> dict[str, str]:
        head = prefix[: prefix.rfind(SEPARATOR) + 1]
        scope = [field_is("id_prefixes", head)] if head else []
        with _translated("read"):
            if await self._points.size() is None:
                return {}
            selected = of_user(tenant_id, user_id, *scope)
            records = await self._points.scroll(selected, fields=["id", "digest"])
        found = [r.payload or {} for r in records]
        return {f["id"]: f["digest"] for f in found if str(f["id"]).startswith(prefix)}

    async def lookup(
        self, tenant_id: str, user_id: str, entry_ids: Sequence[str]
    ) -> dict[str, IndexEntry]:
        if not entry_ids:
            return {}
        ids = list(dict.fromkeys(point_id(tenant_id, user_id, e) for e in entry_ids))
        with _translated("read"):
            if await self._points.size() is None:
                return {}
            records = await self._points.scroll(of_user(tenant_id, user_id, has_id(ids)))
        found = [entry_of(r.payload or {}) for r in records]
        return {entry.id: entry for entry in found}

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int:
        if not entry_ids:
            return 0
        ids = list(dict.fromkeys(point_id(tenant_id, user_id, e) for e in entry_ids))
        return await self._forget(of_user(tenant_id, user_id, has_id(ids)))

    async def forget_conversation(self, key: ConversationKey) -> int:
        messages = (field_is("kind", "message"), field_is("conversation_id", key.conversation_id))
        return await self._forget(of_user(key.tenant_id, key.user_id, *messages))

    async def forget_user(self, tenant_id: str, user_id: str) -> int:
        return await self._forget(of_user(tenant_id, user_id))

    async def count(self, tenant_id: str, user_id: str) -> int:
        with _translated("read"):
            if await self._points.size() is None:
                return 0
            return await self._points.count(of_user(tenant_id, user_id))

    async def count_without_vector(self, tenant_id: str, user_id: str, *, model: str) -> int:
        """Every point has a vector of the collection's size: those of another model."""
        with _translated("read"):
            if await self._points.size() is None:
                return 0
            other = of_user(tenant_id, user_id, must_not=[field_is("model", model)])
            return await self._points.count(other)

    def load_progress(self) -> int:
        return 0

    def loaded(self, tenant_id: str, user_id: str) -> bool:
        """Always: Qdrant searches server-side, nothing is loaded into this process."""
        return True

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        fresh_within: float | None = None,  # no copy in this process
    ) -> list[SearchHit]:
        """The user's entries relevant to ``query``, ranked as ``hybrid_search.search``
        ranks them. Vectors of another model are not compared: keyword search only."""
        with _translated("search"):
            size = await self._points.size()
            if size is None or query.limit <= 0:
                return []
            return await self._searching.run(tenant_id, user_id, query, model=model, size=size)

    async def _forget(self, selected: qm.Filter) -> int:
        with _translated("delete"):
            if await self._points.size() is None:
                return 0
            count = await self._points.count(selected)
            if count:
                await self._points.delete(selected)
            return count

    async def _check_mark(self, tenant_id: str, user_id: str, erasure: str) -> None:
        if await current_generation(self._redis, self._keys, tenant_id, user_id) != erasure:
            raise ErasedMeanwhile("index write refused: the user was erased meanwhile")


def qdrant_recall_index(
    retrieval: RetrievalConfig, redis: RedisConfig, redis_client: RedisClient
) -> QdrantRecallIndex:
    """The index on the Qdrant at ``QDRANT_URL``, reading erasure marks from ``redis_client``
    (under ``redis``'s key prefix)."""
    key = retrieval.qdrant_api_key
    return QdrantRecallIndex(
        client=AsyncQdrantClient(
            url=retrieval.qdrant_url,
            api_key=key.get_secret_value() if key else None,
            check_compatibility=False,  # the check would connect while the service is wired
        ),
        redis=redis_client,
        keys=RedisKeys(prefix=redis.key_prefix),
    )
