"""The retrieval index in plain Redis (SPEC 5.7): no module, no service beyond Redis.

Per user, under the user's hash tag (``RedisKeys.recall_index``): ``doc`` (entry id ->
JSON), ``vec`` (entry id -> float16 unit embeddings: the entry's own, then its sentences'
when it has several, ``v`` in its JSON saying how many in all), ``seq`` (entry id scored by the write
that last changed it) and ``meta`` (``epoch``, ``seq``, ``model``). Writes (the memory
worker) are Lua scripts that check the user's erasure generation like every other worker
write; a changed entry gets a new ``seq``; a removal leaves a tombstone (``tomb``) at a new
``seq``, so copies in memory drop it at their next sync; an erasure or a rebuild starts
a new ``epoch``.

Searching (the reply path) runs in memory: each process keeps the indexes it searched
lately (:class:`SnapshotCache`, bounded by entries) and brings one up to date with one
script call that returns only what changed since the cached ``seq``, or everything when
the ``epoch`` changed (an erasure, a rebuild) or the copy is older than the tombstones
kept. So a search costs one round trip
and no transfer while the user's index is unchanged. A whole index is loaded page by page
(``LOAD_PAGE`` entries per round trip and per parse, the event loop free between pages), so
neither Redis nor this process's other events wait for a big index; the retriever's time
budget (``LLM_BOT_RETRIEVAL_TIMEOUT_MS``) lets a reply go on without recall meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import structlog

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_erasure import mark_changed
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.errors import ErasedMeanwhile, IndexModelMismatch
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.recall_items import IndexEntry, SearchHit, conversation_prefix
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector

log = structlog.get_logger(__name__)

# KEYS: erasure, meta, doc, vec, seq. ARGV: erasure generation, model, ttl seconds, a new
# epoch (used when the index is new), then (id, digest, doc json, vector) quadruples.
_UPSERT = f"""
if {mark_changed()} then
  return -1
end
local model = redis.call('HGET', KEYS[2], 'model')
if model and model ~= ARGV[2] then
  return -2
end
if not model then
  redis.call('HSET', KEYS[2], 'model', ARGV[2], 'epoch', ARGV[4], 'seq', 0)
end
local written = 0
for i = 5, #ARGV, 4 do
  local old = redis.call('HGET', KEYS[3], ARGV[i])
  if not old or cjson.decode(old)['h'] ~= ARGV[i + 1] then
    local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 3])
    redis.call('ZADD', KEYS[5], seq, ARGV[i])
    written = written + 1
  end
end
for k = 2, 5 do
  redis.call('EXPIRE', KEYS[k], ARGV[3])
end
return written
"""
# KEYS: meta, doc, vec, seq, tomb. ARGV: ttl seconds, tombstones kept, then ids. A removal
# is a tombstone at a new seq (copies in memory drop the entry at their next sync); only
# the latest tombstones are kept: a copy older than ``floor`` (the highest trimmed) loads
# the whole index again.
_REMOVE = """
local removed = 0
for i = 3, #ARGV do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    removed = removed + 1
    redis.call('HDEL', KEYS[3], ARGV[i])
    redis.call('ZREM', KEYS[4], ARGV[i])
    local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
    redis.call('ZADD', KEYS[5], seq, ARGV[i])
  end
end
local excess = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[2])
if excess > 0 then
  local last = redis.call('ZRANGE', KEYS[5], excess - 1, excess - 1, 'WITHSCORES')
  redis.call('HSET', KEYS[1], 'floor', last[2])
  redis.call('ZREMRANGEBYRANK', KEYS[5], 0, excess - 1)
end
if removed > 0 then
  redis.call('EXPIRE', KEYS[5], ARGV[1])
end
return removed
"""
TOMBSTONES_KEPT = 10_000
"""Removals a copy in memory can catch up with incrementally (older copies reload)."""
# KEYS: meta, seq, doc, vec, tomb. ARGV: cached epoch, cached seq. Returns {epoch, seq,
# model, full, ids, docs, vectors, removed}: full is '1' (and nothing follows: the caller
# loads the index page by page, ``_load``) when the epoch changed or the copy is older than
# the kept tombstones; else the entries changed and removed since the cached seq.
_SYNC = """
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'seq', 'model', 'floor')
if not meta[1] then
  return {'', '0', '', '1', {}, {}, {}, {}}
end
if meta[1] ~= ARGV[1] or tonumber(ARGV[2]) < tonumber(meta[4] or '0') then
  return {meta[1], meta[2], meta[3], '1', {}, {}, {}, {}}
end
if meta[2] == ARGV[2] then
  return {meta[1], meta[2], meta[3], '0', {}, {}, {}, {}}
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[2], '+inf', 'LIMIT', 0, 2000)
local removed = redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. ARGV[2], '+inf')
local docs, vecs = {}, {}
if #ids > 0 then
  docs = redis.call('HMGET', KEYS[3], unpack(ids))
  vecs = redis.call('HMGET', KEYS[4], unpack(ids))
end
return {meta[1], meta[2], meta[3], '0', ids, docs, vecs, removed}
"""
LOAD_PAGE = 250
"""Entries per round trip and per parse when a whole index is loaded: each keeps Redis and
this process's event loop busy for milliseconds, not for the whole index."""
SYNC_PAGE = 2000
"""At most this many changed entries per incremental sync (more: a full load)."""


def entry_json(entry: IndexEntry, vectors: int = 1) -> str:
    """The stored JSON of ``entry``, which has ``vectors`` embeddings."""
    return json.dumps(
        {
            "h": entry.digest,
            **({"v": vectors} if vectors > 1 else {}),
            "k": entry.kind,
            "t": entry.text,
            "s": entry.speaker,
            "d": entry.date,
            "c": entry.conversation_id,
            "n": entry.turn,
            "q": entry.seq,
            "src": entry.source_id,
            "w": " ".join(entry.terms),
            "at": entry.indexed_at,
            "tm": int(entry.says_when),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


_DIGEST_LEAD = b'{"h":"'
_DIGEST_END = len(_DIGEST_LEAD) + 16


def stored_digest(doc: bytes | str) -> str:
    """The digest (``h``) of a stored entry's JSON. :func:`entry_json` writes it first, 16
    hex digits (``text_digest``), so it is read from its place without parsing the whole
    document (the text, the terms: ~2 kB for a long message), which the memory worker
    did for every long-term entry on every job and every message entry on every
    finalization; anything else is parsed."""
    raw = doc.encode() if isinstance(doc, str) else doc
    if raw.startswith(_DIGEST_LEAD) and raw[_DIGEST_END : _DIGEST_END + 1] == b'"':
        return raw[len(_DIGEST_LEAD) : _DIGEST_END].decode()
    return str(json.loads(raw)["h"])


def stored_entry(entry_id: str, doc: bytes | str, vectors: bytes) -> tuple[IndexEntry, Vector]:
    """An entry and its embeddings (one row each) as stored by :meth:`RedisRecallIndex.upsert`."""
    data = json.loads(doc)
    return _entry(entry_id, data), _unpack(vectors, int(data.get("v", 1)))


def _entry(entry_id: str, data: dict[str, Any]) -> IndexEntry:
    return IndexEntry(
        id=entry_id,
        kind=data["k"],
        text=data["t"],
        speaker=data["s"],
        date=data["d"],
        conversation_id=data["c"],
        turn=int(data["n"]),
        seq=int(data["q"]),
        source_id=data["src"],
        terms=tuple(data["w"].split()),
        indexed_at=float(data["at"]),
        dating=bool(data["tm"]) if "tm" in data else None,  # not stored by earlier versions
    )


@dataclass
class _Cached:
    epoch: str = ""
    seq: str = "0"
    model: str = ""
    snapshot: IndexSnapshot | None = None
    refreshing: asyncio.Task[None] | None = None
    """The refresh in progress: searches wait for it; one that gives up (its time
    budget) leaves it running, so the next search finds the index loaded."""
    following: asyncio.Task[None] | None = None
    """The refresh that starts when ``refreshing`` ends, shared by the searches that came
    while it ran."""


class SnapshotCache:
    """The indexes this process searched lately, least recently used evicted first once
    they hold more than ``max_entries`` embeddings together (an entry's own and its
    sentences', ``IndexSnapshot.weight``) or more than ``max_bytes`` (``IndexSnapshot.nbytes``:
    embeddings, texts, terms and postings). The copy searched last always stays."""

    def __init__(self, max_entries: int, max_bytes: int | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, _Cached] = OrderedDict()

    def peek(self, scope: str) -> _Cached | None:
        """The copy of ``scope``, if this process holds one (not counted as a use)."""
        return self._items.get(scope)

    def get(self, scope: str) -> _Cached:
        cached = self._items.get(scope)
        if cached is None:
            cached = self._items[scope] = _Cached()
        self._items.move_to_end(scope)
        return cached

    def drop(self, scope: str) -> None:
        self._items.pop(scope, None)

    def shrink(self, loading: IndexSnapshot | None = None, keep: str | None = None) -> None:
        """Evict the least recently used copies while over a bound (the one used last
        always stays). ``loading``: a copy being loaded for ``keep`` (not held yet, and
        ``keep``'s copy is not evicted for it), counted too: a load makes room as it grows,
        so the copies and the one loading stay within the bounds together (before, a
        replica at its budget held one more user's copy while it loaded;
        docs/benchmarks-notebook.md, "Memory per replica")."""
        held = [c.snapshot for c in self._items.values() if c.snapshot is not None]
        if loading is not None:
            held.append(loading)
        total = sum(snapshot.weight for snapshot in held)
        size = sum(snapshot.nbytes for snapshot in held)
        limit = self.max_bytes if self.max_bytes is not None else size
        while (total > self.max_entries or size > limit) and len(self._items) > 1:
            victim = next((scope for scope in self._items if scope != keep), None)
            if victim is None:
                break
            oldest = self._items.pop(victim)
            if oldest.snapshot is not None:
                total -= oldest.snapshot.weight
                size -= oldest.snapshot.nbytes

    @property
    def nbytes(self) -> int:
        """What the copies held take (``IndexSnapshot.nbytes``)."""
        return sum(c.snapshot.nbytes for c in self._items.values() if c.snapshot is not None)


@redis_failures_retryable
class RedisRecallIndex:
    """The ``RecallIndex`` port on plain Redis."""

    def __init__(
        self,
        *,
        client: RedisClient,
        keys: RedisKeys,
        ttl_seconds: int,
        cache_entries: int,
        cache_bytes: int | None = None,
        on_behind: Callable[[], object] | None = None,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._ttl = ttl_seconds
        self._cache = SnapshotCache(cache_entries, cache_bytes)
        self._on_behind = on_behind
        """Called for each search of a copy whose refresh came too late (a metric)."""
        self._loads = asyncio.Semaphore(1)
        """Whole-index loads, one at a time, first come first served: a load's time is its
        own, not shared with every other user loading at once (32 users after a deploy
        each finished last, past their budget; one at a time, each takes its own ~50 ms)."""
        self._load_progress = 0
        self._background: set[asyncio.Task[None]] = set()
        self._upsert = client.register_script(_UPSERT)
        self._remove = client.register_script(_REMOVE)
        self._sync = client.register_script(_SYNC)

    def _key(self, tenant_id: str, user_id: str, part: str) -> str:
        return self._keys.recall_index(tenant_id, user_id, part)

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
        keys = [self._keys.erasure(tenant_id, user_id)] + [
            self._key(tenant_id, user_id, part) for part in ("meta", "doc", "vec", "seq")
        ]
        args: list[Any] = [erasure, model, self._ttl, uuid.uuid4().hex]
        for entry, vectors in entries:
            rows = np.atleast_2d(np.asarray(vectors))
            args += [entry.id, entry.digest, entry_json(entry, len(rows)), _pack(rows)]
        written = int(await self._upsert(keys=keys, args=args))
        if written == -1:
            raise ErasedMeanwhile("index write refused: the user was erased meanwhile")
        if written == -2:
            raise IndexModelMismatch(
                "the user's index holds another embedding model's vectors (llm-bot memory reindex)"
            )
        return written

    async def digests(self, tenant_id: str, user_id: str, prefix: str) -> dict[str, str]:
        found: dict[str, str] = {}
        async for name, raw in self._redis.hscan_iter(
            self._key(tenant_id, user_id, "doc"), match=f"{prefix}*", count=500
        ):
            found[_text(name)] = stored_digest(raw)
        return found

    async def remove(self, tenant_id: str, user_id: str, entry_ids: Sequence[str]) -> int:
        if not entry_ids:
            return 0
        keys = [
            self._key(tenant_id, user_id, part) for part in ("meta", "doc", "vec", "seq", "tomb")
        ]
        return int(await self._remove(keys=keys, args=[self._ttl, TOMBSTONES_KEPT, *entry_ids]))

    async def lookup(
        self, tenant_id: str, user_id: str, entry_ids: Sequence[str]
    ) -> dict[str, IndexEntry]:
        if not entry_ids:
            return {}
        docs = await self._redis.hmget(self._key(tenant_id, user_id, "doc"), list(entry_ids))
        return {
            entry_id: _entry(entry_id, json.loads(raw))
            for entry_id, raw in zip(entry_ids, cast("list[bytes | None]", docs), strict=True)
            if raw is not None
        }

    async def forget_conversation(self, key: ConversationKey) -> int:
        """The entries of its messages (their ids start with the conversation's prefix)."""
        prefix = conversation_prefix(key.conversation_id)
        ids = await self.digests(key.tenant_id, key.user_id, prefix)
        return await self.remove(key.tenant_id, key.user_id, list(ids))

    async def entries(self, tenant_id: str, user_id: str) -> tuple[str | None, list[IndexEntry]]:
        """The embedding model and every entry of the user's index, without vectors, in
        the order they were written (``seq``: a search's order among equal scores; ``llm-bot
        memory export``), read ``LOAD_PAGE`` at a time."""
        meta, seq_key, doc = (
            self._key(tenant_id, user_id, part) for part in ("meta", "seq", "doc")
        )
        model = await self._redis.hget(meta, "model")
        found: list[IndexEntry] = []
        start = 0
        while True:
            ids = cast(
                "list[bytes]", await self._redis.zrange(seq_key, start, start + LOAD_PAGE - 1)
            )
            if not ids:
                break
            docs = cast("list[bytes | None]", await self._redis.hmget(doc, ids))
            found += [
                _entry(_text(entry_id), json.loads(raw))
                for entry_id, raw in zip(ids, docs, strict=True)
                if raw is not None
            ]
            start += LOAD_PAGE
        return (_text(model) if model is not None else None), found

    async def forget_user(self, tenant_id: str, user_id: str) -> int:
        names = [
            self._key(tenant_id, user_id, part) for part in ("meta", "doc", "vec", "seq", "tomb")
        ]
        count = int(await self._redis.hlen(names[1]))
        await self._redis.unlink(*names)
        self._cache.drop(self._keys.user_scope(tenant_id, user_id))
        return count

    async def aclose(self) -> None:
        """Nothing of its own: the Redis client is the service's."""

    async def count(self, tenant_id: str, user_id: str) -> int:
        return int(await self._redis.hlen(self._key(tenant_id, user_id, "doc")))

    async def count_without_vector(self, tenant_id: str, user_id: str, *, model: str) -> int:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hlen(self._key(tenant_id, user_id, "doc"))
            pipe.hlen(self._key(tenant_id, user_id, "vec"))
            pipe.hget(self._key(tenant_id, user_id, "meta"), "model")
            entries, vectors, stored_model = await pipe.execute()
        if stored_model is not None and _text(stored_model) != model:
            return int(entries)
        return max(0, int(entries) - int(vectors))

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        fresh_within: float | None = None,
    ) -> list[SearchHit]:
        """Bring this process's copy of the user's index up to date (one round trip) and
        search it. Vectors of another model are not compared: keyword search only.

        ``fresh_within``: when this process holds a copy, wait at most that long for it to
        be brought up to date; past it, search the copy as it stands (it lacks only what
        was indexed since its last refresh: the latest turns, which the window holds)
        while the refresh goes on for the next search. A busy event loop then delays the
        reply's recall, never empties it."""
        scope = self._keys.user_scope(tenant_id, user_id)
        cached = self._cache.get(scope)
        refresh = asyncio.ensure_future(self._fresh(tenant_id, user_id, cached))
        if fresh_within is None or cached.snapshot is None:
            await refresh
        else:
            done, _ = await asyncio.wait({refresh}, timeout=fresh_within)
            if refresh in done:
                refresh.result()
            else:
                self._background.add(refresh)
                refresh.add_done_callback(self._settled)
                log.info("retrieval.copy_behind", waited_ms=round(fresh_within * 1000))
                if self._on_behind is not None:
                    self._on_behind()
        snapshot = cached.snapshot
        self._cache.shrink()
        if snapshot is None:
            return []
        if cached.model != model and query.vector is not None:
            query = replace(query, vector=None)  # every other bound and filter kept
        return search(snapshot, query)

    def _settled(self, task: asyncio.Task[None]) -> None:
        """A refresh left to finish in the background: its failure is the next search's
        (logged there), not an unretrieved exception."""
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("retrieval.refresh_failed", error=type(task.exception()).__name__)

    def load_progress(self) -> int:
        """Pages read by this process's whole-index loads, plus loads ended (finished or
        given up), so far."""
        return self._load_progress

    def loaded(self, tenant_id: str, user_id: str) -> bool:
        """Whether this process holds a copy of the user's index (then a search checks it
        for changes in one round trip; otherwise it loads the whole index first)."""
        cached = self._cache.peek(self._keys.user_scope(tenant_id, user_id))
        return cached is not None and cached.snapshot is not None

    async def _fresh(self, tenant_id: str, user_id: str, cached: _Cached) -> None:
        """``cached`` brought up to date with a refresh that started after this call did.
        While one runs, every search that comes shares the one refresh that follows it
        (not one each): 32 questions of one user in flight cost two round trips, not 32
        in a row (each waiting for event-loop turns: searches timed out behind them)."""
        running = cached.refreshing
        if running is None or running.done():
            cached.refreshing = asyncio.create_task(self._refresh(tenant_id, user_id, cached))
            cached.refreshing.add_done_callback(_retrieved)
            await asyncio.shield(cached.refreshing)
            return
        if cached.following is None:
            cached.following = asyncio.create_task(
                self._follow(running, tenant_id, user_id, cached)
            )
            cached.following.add_done_callback(_retrieved)
        await asyncio.shield(cached.following)

    async def _follow(
        self, running: asyncio.Task[None], tenant_id: str, user_id: str, cached: _Cached
    ) -> None:
        """The refresh after ``running``, for what was written since it started."""
        with contextlib.suppress(Exception):  # its own callers got its failure
            await running
        cached.following = None
        cached.refreshing = asyncio.current_task()  # this one, now running
        await self._refresh(tenant_id, user_id, cached)

    async def _refresh(self, tenant_id: str, user_id: str, cached: _Cached) -> None:
        """Bring ``cached`` up to date: the changes since its seq in one round trip, or,
        when the epoch changed (or too much changed), the whole index page by page."""
        for _ in range(3):  # a full load races a removal at most a few times
            keys = [
                self._key(tenant_id, user_id, part)
                for part in ("meta", "seq", "doc", "vec", "tomb")
            ]
            reply = await self._sync(keys=keys, args=[cached.epoch, cached.seq])
            epoch, seq, model, full, ids, docs, vectors, removed = cast("list[Any]", reply)
            if not epoch:  # the user has no index
                cached.snapshot, cached.epoch, cached.seq = IndexSnapshot(), "", "0"
                return
            if full == b"1" or cached.snapshot is None or len(ids) >= SYNC_PAGE:
                await self._load(tenant_id, user_id, cached)
                continue  # then what changed while it loaded
            cached.epoch, cached.seq, cached.model = _text(epoch), _text(seq), _text(model)
            cached.snapshot.remove(_text(entry_id) for entry_id in removed)  # before upserts
            cached.snapshot.upsert(
                stored_entry(_text(entry_id), doc, vector)
                for entry_id, doc, vector in zip(ids, docs, vectors, strict=True)
                if doc is not None and vector is not None
            )
            return

    async def _load(self, tenant_id: str, user_id: str, cached: _Cached) -> None:
        """The whole index into a new snapshot, ``LOAD_PAGE`` entries per round trip and
        per parse, yielding to the event loop between pages; swapped in when complete.
        One load at a time in this process (``_loads``)."""
        async with self._loads:
            try:
                await self._load_now(tenant_id, user_id, cached)
            finally:
                self._load_progress += 1

    async def _load_now(self, tenant_id: str, user_id: str, cached: _Cached) -> None:
        scope = self._keys.user_scope(tenant_id, user_id)
        meta, seq_key, doc, vec = (
            self._key(tenant_id, user_id, part) for part in ("meta", "seq", "doc", "vec")
        )
        epoch, upto, model = cast(
            "list[bytes | None]", await self._redis.hmget(meta, ["epoch", "seq", "model"])
        )
        snapshot = IndexSnapshot()
        low: str | float = "-inf"
        while True:
            page = cast(
                "list[tuple[bytes, float]]",
                await self._redis.zrangebyscore(
                    seq_key, low, "+inf", start=0, num=LOAD_PAGE, withscores=True
                ),
            )
            if not page:
                break
            ids = [entry_id for entry_id, _ in page]
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hmget(doc, ids)
                pipe.hmget(vec, ids)
                docs, vectors = await pipe.execute()
            snapshot.upsert(
                stored_entry(_text(entry_id), raw_doc, raw_vec)
                for entry_id, raw_doc, raw_vec in zip(ids, docs, vectors, strict=True)
                if raw_doc is not None and raw_vec is not None
            )
            self._load_progress += 1
            self._cache.shrink(loading=snapshot, keep=scope)  # room made as the copy grows
            low = f"({page[-1][1]:.0f}"
            if len(page) < LOAD_PAGE:
                break
            await asyncio.sleep(0)  # other events go on between pages
        cached.snapshot = snapshot
        cached.epoch = _text(epoch) if epoch is not None else ""
        cached.seq = _text(upto) if upto is not None else "0"
        cached.model = _text(model) if model is not None else ""


def _retrieved(task: asyncio.Task[None]) -> None:
    """A refresh's failure is its waiting searches' (they raise it); one that every search
    gave up on (their time budget) is not an unretrieved exception."""
    if not task.cancelled():
        task.exception()


def _pack(vectors: Vector) -> bytes:
    return np.asarray(vectors, dtype=np.float16).tobytes()


def _unpack(raw: bytes, rows: int) -> Vector:
    """The ``rows`` embeddings packed in ``raw`` (one row each)."""
    return np.frombuffer(raw, dtype=np.float16).astype(np.float32).reshape(rows, -1)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
