"""The memory worker's Redis state: compaction and classification progress per
conversation, worker commits under the conversation lease, activity for the idle sweep,
and done-markers of jobs."""

from __future__ import annotations

from typing import cast

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_erasure import current_generation, mark_changed
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, parse_activity_member
from llm_bot.adapters.redis_memory import MAX_SEQ_PER_TURN
from llm_bot.adapters.redis_registry import REGISTER_LUA
from llm_bot.adapters.redis_schedules import RedisSchedule
from llm_bot.errors import ErasedMeanwhile, MemoryConflict
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import ConversationProgress, WorkingMemory

# Every worker write checks the user's erasure generation against the one the job read
# first (KEYS[1] the mark, ARGV[1] the generation; see redis_erasure.py).
# KEYS: erasure, wm, meta, lease. ARGV: erasure, token, expected compacted_through, new
# compacted_through, wm json ('' = delete the working memory).
_COMMIT_COMPACTION = f"""
if {mark_changed()} then
  return {{'erased', '0'}}
end
if redis.call('GET', KEYS[4]) ~= ARGV[2] then
  return {{'fenced', '0'}}
end
local done = tonumber(redis.call('HGET', KEYS[3], 'compacted_through') or '0')
if done ~= tonumber(ARGV[3]) then
  return {{'conflict', tostring(done)}}
end
local version = tonumber(redis.call('HGET', KEYS[3], 'version') or '0') + 1
redis.call('HSET', KEYS[3], 'compacted_through', ARGV[4], 'version', version)
if ARGV[5] == '' then
  redis.call('DEL', KEYS[2])
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[2], ARGV[5], 'KEEPTTL')
end
return {{'ok', tostring(version)}}
"""
# KEYS: erasure, meta. ARGV: erasure, field, value.
_RAISE_MARK = f"""
if {mark_changed()} then
  return 0
end
local current = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if tonumber(ARGV[3]) > current then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
end
return 1
"""
# KEYS: erasure, job marker, key registry. ARGV: erasure, ttl seconds.
_MARK_JOB = f"""{REGISTER_LUA}
if {mark_changed()} then
  return 0
end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
register(KEYS[3], KEYS[2], ARGV[2])
return 1
"""


@redis_failures_retryable
class RedisMemoryProgress:
    """Worker-side reads and writes of a conversation's memory."""

    def __init__(self, *, client: RedisClient, keys: RedisKeys, job_ttl_seconds: int) -> None:
        self._redis = client
        self._keys = keys
        self._job_ttl = job_ttl_seconds
        self._commit = client.register_script(_COMMIT_COMPACTION)
        self._raise = client.register_script(_RAISE_MARK)
        self._mark_job = client.register_script(_MARK_JOB)
        self._activity = RedisSchedule(client=client, keys=keys.activity())

    async def erasure(self, tenant_id: str, user_id: str) -> str:
        """The user's erasure generation: read it before reading their memory and pass it
        to every write, which is refused if it changed in between. Raises the retryable
        ``ErasedMeanwhile`` while an erasure of the user is in progress."""
        return await current_generation(self._redis, self._keys, tenant_id, user_id)

    async def exists(self, key: ConversationKey) -> bool:
        """Whether the conversation has memory (its meta) at all."""
        return bool(await self._redis.exists(self._keys.conversation_meta(key)))

    async def load(self, key: ConversationKey) -> ConversationProgress:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(self._keys.working_memory(key))
            pipe.hmget(
                self._keys.conversation_meta(key),
                ["turn", "compacted_through", "classified_through", "indexed_through"],
            )
            raw, (turn, compacted, classified, indexed) = await pipe.execute()
        return ConversationProgress(
            memory=WorkingMemory.model_validate_json(raw) if raw else None,
            last_turn=int(turn or 0),
            compacted_through=int(compacted or 0),
            classified_through=int(classified or 0),
            indexed_through=int(indexed or 0),
        )

    async def trace_turns(self, key: ConversationKey, first: int, last: int) -> list[ChatMessage]:
        """The raw trace's messages of turns ``first..last``, in order."""
        if last < first:
            return []
        members = cast(
            "list[bytes]",
            await self._redis.zrangebyscore(
                self._keys.raw_trace(key),
                first * MAX_SEQ_PER_TURN,
                last * MAX_SEQ_PER_TURN + MAX_SEQ_PER_TURN - 1,
            ),
        )
        return [ChatMessage.model_validate_json(member) for member in members]

    async def commit_compaction(
        self,
        key: ConversationKey,
        *,
        erasure: str,
        lease_token: str,
        expected_compacted_through: int,
        compacted_through: int,
        memory: WorkingMemory | None,
    ) -> None:
        """Advance ``compacted_through`` and write (or, with None, drop) the working memory,
        atomically, only if the user's erasure mark is still ``erasure``, the lease is
        still ours and nobody compacted meanwhile."""
        keys = [
            self._keys.erasure(key.tenant_id, key.user_id),
            self._keys.working_memory(key),
            self._keys.conversation_meta(key),
            self._keys.lease(key),
        ]
        args: list[str | int] = [
            erasure,
            lease_token,
            expected_compacted_through,
            compacted_through,
            memory.model_dump_json() if memory is not None else "",
        ]
        status, value = cast("list[bytes]", await self._commit(keys=keys, args=args))
        if status == b"erased":
            raise ErasedMeanwhile("compaction commit refused: the user was erased meanwhile")
        if status != b"ok":
            raise MemoryConflict(f"compaction commit refused: {status.decode()} ({value.decode()})")

    async def mark_classified(self, key: ConversationKey, turn: int, *, erasure: str) -> None:
        await self._raise_mark(key, "classified_through", turn, erasure=erasure)

    async def mark_indexed(self, key: ConversationKey, turn: int, *, erasure: str) -> None:
        await self._raise_mark(key, "indexed_through", turn, erasure=erasure)

    async def reset_indexed(self, key: ConversationKey) -> None:
        """Index the conversation again from its first turn (``llm-bot memory reindex``)."""
        await self._redis.hdel(self._keys.conversation_meta(key), "indexed_through")

    async def trace_exists(self, keys: list[ConversationKey]) -> list[bool]:
        """Whether each conversation still has its raw trace."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.exists(self._keys.raw_trace(key))
            return [bool(found) for found in await pipe.execute()]

    async def _raise_mark(
        self, key: ConversationKey, field: str, turn: int, *, erasure: str
    ) -> None:
        keys = [self._keys.erasure(key.tenant_id, key.user_id), self._keys.conversation_meta(key)]
        marked = await self._raise(keys=keys, args=[erasure, field, turn])
        if not marked:
            raise ErasedMeanwhile(f"{field} mark refused: the user was erased meanwhile")

    async def touch(self, key: ConversationKey, at: float) -> None:
        await self._activity.add(activity_member(key), at, later=True)

    async def idle(self, before: float, limit: int = 100) -> list[tuple[ConversationKey, float]]:
        rows = await self._activity.due(before, limit)
        return [(parse_activity_member(member), score) for member, score in rows]

    async def idle_count(self, before: float) -> int:
        return await self._activity.due_count(before)

    async def clear_activity(self, key: ConversationKey, seen_score: float) -> bool:
        """Remove the conversation from the sweep unless it became active again."""
        return await self._activity.remove_if_due(activity_member(key), seen_score)

    async def job_done(self, tenant_id: str, user_id: str, job_id: str) -> bool:
        return bool(await self._redis.exists(self._keys.memory_job(tenant_id, user_id, job_id)))

    async def mark_job_done(
        self, tenant_id: str, user_id: str, job_id: str, *, erasure: str
    ) -> None:
        keys = [
            self._keys.erasure(tenant_id, user_id),
            self._keys.memory_job(tenant_id, user_id, job_id),
            self._keys.registry(tenant_id, user_id),
        ]
        marked = await self._mark_job(keys=keys, args=[erasure, self._job_ttl])
        if not marked:
            raise ErasedMeanwhile("job marker refused: the user was erased meanwhile")

    async def forget_activity(self, key: ConversationKey) -> None:
        """Take the conversation out of the idle sweep (it has no memory left)."""
        await self._activity.remove(activity_member(key))
