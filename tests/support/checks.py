"""Assertions of effectively-once delivery: candidates by event id, memory turns, DLQ."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import cast

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.bootstrap import memory_store, redis_client
from llm_bot.config import Settings
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.harness import Integrator, Received


def key_bytes(key: bytes | str) -> bytes:
    """A Redis key as the service's clients return it (bytes), whatever the stubs say."""
    return key if isinstance(key, bytes) else key.encode()


def key_text(key: bytes | str) -> str:
    """A Redis key as text."""
    return key.decode() if isinstance(key, bytes) else key


async def collect_candidates(
    client: Integrator, event_ids: Iterable[str], *, within: float = 60.0, settle: float = 1.0
) -> list[Received]:
    """Every candidate until each event id has one, then whatever arrives while settling."""
    waiting = set(event_ids)
    received: list[Received] = []
    async with asyncio.timeout(within):
        while waiting:
            candidate = await client.candidates.get()
            received.append(candidate)
            waiting.discard(candidate.body["event_id"])
    await asyncio.sleep(settle)
    while not client.candidates.empty():
        received.append(client.candidates.get_nowait())
    return received


def assert_one_candidate_id_per_event(received: list[Received], event_ids: Iterable[str]) -> None:
    ids: dict[str, set[str]] = defaultdict(set)
    texts: dict[str, set[str]] = defaultdict(set)
    for candidate in received:
        ids[candidate.body["event_id"]].add(candidate.body["id"])
        texts[candidate.body["id"]].add(candidate.body["text"])
    expected = set(event_ids)
    assert set(ids) == expected, f"missing {expected - set(ids)}, unexpected {set(ids) - expected}"
    assert all(len(v) == 1 for v in ids.values()), "an event got two candidate ids"
    assert all(len(v) == 1 for v in texts.values()), "a candidate id was sent with two texts"


async def assert_memory_turns_exactly_once(
    settings: Settings, key: ConversationKey, event_ids: Iterable[str]
) -> list[str]:
    """The raw trace holds turns 1..n, each one user + one assistant message, each event once.

    Returns the event ids in turn order."""
    client = redis_client(settings.redis)
    try:
        trace = await memory_store(settings, client).raw_trace(key)
    finally:
        await client.aclose()
    users = [m for m in trace if m.role == "user"]
    assistants = [m for m in trace if m.role == "assistant"]
    expected = sorted(event_ids)
    assert sorted(m.event_id or "" for m in users) == expected, "a user turn is missing or doubled"
    assert [m.turn for m in users] == list(range(1, len(expected) + 1)), "turns not 1..n"
    assert [m.turn for m in assistants] == [m.turn for m in users], "a reply is missing or doubled"
    assert all(a.event_id == u.event_id for a, u in zip(assistants, users, strict=True))
    return [m.event_id or "" for m in users]


async def dlq_depth(client: Integrator) -> int:
    return await client.queue_depth(client.settings.dlq)


async def activity_members(client: RedisClient, prefix: str) -> dict[str, float]:
    """Every member of the activity schedule (all its shards) with its score."""
    members: dict[str, float] = {}
    for name in RedisKeys(prefix=prefix).activity().every:
        rows = cast("list[tuple[bytes, float]]", await client.zrange(name, 0, -1, withscores=True))
        for member, score in rows:
            members[member.decode()] = float(score)
    return members
