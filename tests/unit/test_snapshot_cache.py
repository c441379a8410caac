"""The in-process copies of users' indexes: bounded by entries and by bytes, least
recently searched first (``adapters/redis_recall_index.SnapshotCache``)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from llm_bot.adapters.redis_recall_index import SnapshotCache
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry

WORDS = [
    "kettle",
    "garden",
    "sister",
    "Lisbon",
    "violin",
    "budget",
    "parrot",
    "lantern",
    "harbour",
    "orchard",
]


def snapshot(entries: int, seed: int = 0) -> IndexSnapshot:
    rng = np.random.default_rng(seed)
    copy = IndexSnapshot()
    batch = []
    for n in range(entries):
        text = " ".join(rng.choice(WORDS, size=40)) + f" note {n}"
        item = IndexEntry(
            id=f"m|c1|{n}",
            kind="message",
            text=text,
            speaker="user",
            date="2025-07-30T10:00:00+00:00",
            conversation_id="c1",
            turn=n + 1,
            seq=0,
            source_id=f"m|c1|{n}",
            terms=tuple(" ".join(keyword_terms(f"user {text}")).split()),  # as a load reads
            dating=False,
        )
        batch.append((item, rng.normal(size=(2, 16)).astype(np.float32)))
    copy.upsert(batch)
    return copy


def test_copies_past_the_byte_budget_are_dropped_least_recently_searched_first() -> None:
    """Past ``max_bytes`` the least recently used copies go, whatever the entry bound; the
    one used last stays even alone over the budget."""
    one = snapshot(50).nbytes
    cache = SnapshotCache(max_entries=10**9, max_bytes=int(2.5 * one))
    for user in ("a", "b", "c"):
        cache.get(user).snapshot = snapshot(50)
    cache.get("a")  # a used again: b is now the least recently used
    cache.shrink()
    assert cache.peek("b") is None
    assert cache.peek("a") is not None
    assert cache.peek("c") is not None
    assert cache.nbytes <= 2.5 * one
    cache.max_bytes = 1
    cache.shrink()
    assert cache.peek("a") is not None  # the last one used stays
    assert cache.peek("c") is None


def test_a_copys_estimated_bytes_are_near_what_it_allocates() -> None:
    """``nbytes`` (what the budget counts) is within a factor of 1.5 of what building the
    copy allocated, its entries' texts and terms included (each term its own string, as
    a load from Redis makes them)."""
    tracemalloc.start()
    try:
        copy = snapshot(400, seed=3)
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert allocated / 1.5 <= copy.nbytes <= allocated * 1.5
    copy.remove([f"m|c1|{n}" for n in range(200)])
    assert copy.nbytes < allocated


def test_a_copy_being_loaded_makes_room_as_it_grows() -> None:
    """A copy being loaded counts against the budget before it is held: the least
    recently used copies go to make room for it (never the loading user's own), so the
    copies and the one loading stay within the byte budget together."""
    one, part = snapshot(50).nbytes, snapshot(10).nbytes
    budget = 2 * one + part
    cache = SnapshotCache(max_entries=10**9, max_bytes=budget)
    for user in ("a", "b"):
        cache.get(user).snapshot = snapshot(50)
    cache.get("c")  # c's search starts: its copy loads
    cache.shrink(loading=snapshot(10), keep="c")
    assert cache.peek("a") is not None  # its first pages still fit
    growing = snapshot(50)
    cache.shrink(loading=growing, keep="c")
    assert cache.peek("a") is None  # the least recently used made room
    assert cache.peek("b") is not None
    assert cache.nbytes + growing.nbytes <= budget
    cache.get("c").snapshot = growing
    cache.get("b")  # b used again: c is now the oldest, but it is the one loading
    cache.max_bytes = 1
    cache.shrink(loading=snapshot(50), keep="c")
    assert cache.peek("c") is not None
    assert cache.peek("b") is None
