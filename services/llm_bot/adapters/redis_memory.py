"""Working memory, raw trace and processed-event records in plain Redis (no modules).

Per conversation: ``wm`` (JSON string, sliding TTL), ``meta`` (hash: last turn and
version, raw-trace lifetime), ``trace`` (sorted set of every message, score
``turn * 1000 + seq``, raw-trace lifetime). Per event: ``evt`` (what it produced, dedupe
lifetime). ``load`` is one pipelined round trip; ``commit`` is one atomic script that
checks the lease token (fencing: a holder whose lease expired cannot write) and the
version (optimistic concurrency: no lost updates) before writing anything.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from llm_bot.adapters.redis_connection import RedisClient, queue_script
from llm_bot.adapters.redis_erasure import (
    ErasureMarks,
    erased_before,
    generation,
    mark_changed,
)
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, user_member
from llm_bot.adapters.redis_registry import REGISTER_LUA, registered
from llm_bot.adapters.redis_schedules import RedisSchedule
from llm_bot.errors import ErasedMeanwhile, MemoryConflict
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import MemoryCommit, ProcessedEvent, Recalled, WorkingMemory

MAX_SEQ_PER_TURN = 1000

# KEYS: wm, meta, trace, processed record, lease, erasure mark, key registry. ARGV:
# expected version, turn, wm json, wm ttl, processed json, dedupe ttl, trace ttl, lease
# token, erasure generation, then (score, message json) pairs of the raw trace.
_COMMIT = f"""{REGISTER_LUA}
if {mark_changed(6, 9)} then
  return {{'erased', '0'}}
end
if ARGV[8] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[8] then
  return {{'fenced', '0'}}
end
if ARGV[5] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then
  return {{'duplicate', '0'}}
end
local version = tonumber(redis.call('HGET', KEYS[2], 'version') or '0')
if version ~= tonumber(ARGV[1]) then
  return {{'conflict', tostring(version)}}
end
redis.call('HSET', KEYS[2], 'turn', ARGV[2], 'version', version + 1)
redis.call('EXPIRE', KEYS[2], ARGV[7])
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
local written = {{KEYS[2], ARGV[7], KEYS[1], ARGV[4]}}
for i = 10, #ARGV, 2 do
  redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1])
end
if #ARGV >= 10 then
  redis.call('EXPIRE', KEYS[3], ARGV[7])
  written[#written + 1] = KEYS[3]
  written[#written + 1] = ARGV[7]
end
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[4], ARGV[5], 'EX', ARGV[6])
  written[#written + 1] = KEYS[4]
  written[#written + 1] = ARGV[6]
end
register_all(KEYS[7], written)
return {{'ok', tostring(version + 1)}}
"""


def trace_score(message: ChatMessage) -> int:
    """Sort key of a message in the raw trace: turn, then sequence within the turn."""
    return message.turn * MAX_SEQ_PER_TURN + min(message.seq, MAX_SEQ_PER_TURN - 1)


@redis_failures_retryable
class RedisMemoryStore:
    """The ``MemoryStore`` port on Redis."""

    def __init__(
        self,
        *,
        client: RedisClient,
        keys: RedisKeys,
        ttl_seconds: int,
        trace_retention_seconds: int,
        dedupe_ttl_seconds: int,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._ttl = ttl_seconds
        self._trace_ttl = trace_retention_seconds
        self._dedupe_ttl = dedupe_ttl_seconds
        self._commit = client.register_script(_COMMIT)
        self._marks = ErasureMarks(client=client, keys=keys)
        self._activity = RedisSchedule(client=client, keys=keys.activity())
        self._retention = RedisSchedule(client=client, keys=keys.retention_schedule())
        self._schedules = [
            RedisSchedule(client=client, keys=names) for names in keys.conversation_schedules()
        ]

    async def load(self, key: ConversationKey, event_id: str) -> Recalled:
        """Working memory, last turn, version, the event's processed record and the user's
        long-term bundle."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(self._keys.working_memory(key))
            pipe.hmget(self._keys.conversation_meta(key), ["turn", "version"])
            pipe.get(self._keys.processed_event(key, event_id))
            pipe.get(self._keys.long_term(key.tenant_id, key.user_id, "bundle"))
            pipe.hgetall(self._keys.erasure(key.tenant_id, key.user_id))
            loaded = await pipe.execute()
        raw_memory, (turn, version), raw_processed, raw_bundle, mark = loaded
        erasure = generation(mark)  # raises ErasedMeanwhile (retried) during an erasure
        memory = WorkingMemory.model_validate_json(raw_memory) if raw_memory else WorkingMemory()
        processed = ProcessedEvent.model_validate_json(raw_processed) if raw_processed else None
        return Recalled(
            memory=memory,
            last_turn=int(turn or 0),
            version=int(version or 0),
            processed=processed,
            bundle=(
                LongTermBundle.model_validate_json(raw_bundle) if raw_bundle else LongTermBundle()
            ),
            erasure=erasure,
            erased_before=erased_before(mark, key.conversation_id),
        )

    async def commit(self, commit: MemoryCommit) -> int:
        """Write the turn atomically; returns the new version.

        Raises ``MemoryConflict`` when the conversation changed since it was loaded or
        the event was already committed by someone else.
        """
        key = commit.key
        event_id = commit.processed.event_id if commit.processed else None
        args: list[Any] = [
            commit.expected_version,
            commit.turn,
            commit.memory.model_dump_json(),
            self._ttl,
            commit.processed.model_dump_json() if commit.processed else "",
            self._dedupe_ttl,
            self._trace_ttl,
            commit.lease_token or "",
            commit.erasure,
        ]
        for message in commit.trace:
            args.extend((trace_score(message), message.model_dump_json()))
        keys = [
            self._keys.working_memory(key),
            self._keys.conversation_meta(key),
            self._keys.raw_trace(key),
            self._keys.processed_event(key, event_id) if event_id else self._keys.raw_trace(key),
            self._keys.lease(key),
            self._keys.erasure(key.tenant_id, key.user_id),
            self._keys.registry(key.tenant_id, key.user_id),
        ]
        async with self._redis.pipeline(transaction=False) as pipe:
            queue_script(pipe, self._commit, keys=keys, args=args)
            # In the same round trip, the conversation joins the idle sweep's activity set
            # (another slot, so not in the script): a turn whose memory job is lost is
            # still finalized, and compacted, once the conversation goes idle.
            self._activity.queue_add(pipe, activity_member(key), time.time(), later=True)
            results = await pipe.execute(raise_on_error=False)
        if isinstance(results[0], Exception):
            raise results[0]
        status, value = cast("list[bytes]", results[0])
        if status == b"ok":
            return int(value)
        if status == b"erased":
            raise ErasedMeanwhile("memory commit refused: the user was erased meanwhile")
        raise MemoryConflict(f"memory commit refused: {status.decode()} (version {value.decode()})")

    async def raw_trace(self, key: ConversationKey) -> list[ChatMessage]:
        """Every message of the conversation's raw trace, in turn and sequence order."""
        members = cast("list[bytes]", await self._redis.zrange(self._keys.raw_trace(key), 0, -1))
        return [ChatMessage.model_validate_json(member) for member in members]

    async def working_memory(self, key: ConversationKey) -> WorkingMemory | None:
        raw = await self._redis.get(self._keys.working_memory(key))
        return WorkingMemory.model_validate_json(raw) if raw else None

    async def forget_conversation(
        self, key: ConversationKey, *, before: float | None = None
    ) -> int:
        """Delete one conversation's working memory, meta, raw trace and the processed
        records of its events (they hold the replies), found through the trace's event ids
        (the trace outlives them: its retention is at least the dedupe window)."""
        async with self._erasing(
            key.tenant_id, key.user_id, before=before, conversation_id=key.conversation_id
        ):
            events = {m.event_id for m in await self.raw_trace(key) if m.event_id}
            names = (
                *self._keys.conversation_keys(key),
                self._keys.flow(key),
                *(self._keys.processed_event(key, event_id) for event_id in sorted(events)),
            )
            for schedule in self._schedules:
                await schedule.remove(activity_member(key))
            deleted = int(await self._redis.unlink(*names))
            await self._redis.zrem(self._keys.registry(key.tenant_id, key.user_id), *names)
            return deleted

    async def forget_user(
        self, tenant_id: str, user_id: str, *, before: float | None = None
    ) -> int:
        """Delete every key of one user in one tenant, and nothing else; only the erasure
        mark stays, for ``ERASURE_GUARD_SECONDS``. Costs O(the user's keys): the fixed
        names, the registry's names (and the leases and activity entries of the
        conversations among them), the registry itself."""
        async with self._erasing(tenant_id, user_id, before=before):
            registry = self._keys.registry(tenant_id, user_id)
            names = await registered(self._redis, registry)
            parsed = map(self._keys.parse_conversation_key, names)
            conversations = {key for key in parsed if key is not None}
            doomed = [
                *self._keys.fixed_user_keys(tenant_id, user_id),
                *names,
                *(self._keys.lease(key) for key in conversations),
                *(self._keys.flow(key) for key in conversations),
            ]
            deleted = 0
            for start in range(0, len(doomed), 500):
                deleted += int(await self._redis.unlink(*doomed[start : start + 500]))
            await self._redis.unlink(registry)
            await self._retention.remove(user_member(tenant_id, user_id))
            members = [activity_member(key) for key in conversations]
            for schedule in self._schedules:
                await schedule.remove(*members)
            return deleted

    @asynccontextmanager
    async def _erasing(
        self,
        tenant_id: str,
        user_id: str,
        *,
        before: float | None = None,
        conversation_id: str = "*",
    ) -> AsyncIterator[None]:
        """The erasure marked active around the deletes (readers back off, writers that
        read earlier are refused) and ended even if a delete fails; Redis failures are
        ``MemoryUnavailable``, so the ``memory.forget`` is retried."""
        erasure = await self._marks.begin(
            tenant_id, user_id, before=before, conversation_id=conversation_id
        )
        try:
            yield
        finally:
            await self._marks.end(tenant_id, user_id, erasure)
