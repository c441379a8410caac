"""Conversations' flows checkpointed in Redis: one thread per conversation under the
user's hash tag (``RedisKeys.flow``), written by :class:`RedisCheckpointSaver`; the
``FlowCheckpoints`` port of ``service/flow_runner.py``."""

from __future__ import annotations

from llm_bot.adapters.redis_checkpointer import RedisCheckpointSaver
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_erasure import current_generation
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, parse_activity_member
from llm_bot.memory.conversation_key import ConversationKey


@redis_failures_retryable
class RedisFlowCheckpoints:
    """The flows' LangGraph checkpointer, and the reads a flow runner makes beside it."""

    def __init__(self, *, client: RedisClient, keys: RedisKeys, ttl_seconds: int) -> None:
        """``ttl_seconds``: how long a checkpoint lives after its last write."""
        self._redis = client
        self._keys = keys
        self.saver = RedisCheckpointSaver(
            client,
            thread_key=lambda thread: keys.flow(parse_activity_member(thread)),
            ttl_seconds=ttl_seconds,
        )

    def thread_id(self, key: ConversationKey) -> str:
        return activity_member(key)

    async def exists(self, key: ConversationKey) -> bool:
        """Whether the conversation has a checkpoint (one ``EXISTS``)."""
        return bool(await self._redis.exists(self._keys.flow(key)))

    async def delete(self, key: ConversationKey) -> None:
        await self.saver.adelete_thread(activity_member(key))

    async def erasure_generation(self, key: ConversationKey) -> str:
        """The user's erasure generation now; ``ErasedMeanwhile`` while one is erased."""
        return await current_generation(self._redis, self._keys, key.tenant_id, key.user_id)
