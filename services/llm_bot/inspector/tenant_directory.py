"""A tenant's users and conversations, newest activity first, read from Redis.

Conversations are found by their ``meta`` keys (one SCAN of the tenant's pattern); a
conversation's last activity is the ``created_at`` of the last message of its raw trace.
A user's last activity is that of their newest conversation. An inspector reads this on
demand: it costs O(the tenant's conversations), never a scan of other tenants' keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_registry import registered
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.messages import ChatMessage

_BATCH = 200


@dataclass(frozen=True)
class ConversationActivity:
    key: ConversationKey
    last_activity: str
    """RFC 3339 time of the newest message in the raw trace ("" when it has none)."""
    last_turn: int


@dataclass(frozen=True)
class UserActivity:
    user_id: str
    last_activity: str
    conversations: int


class RedisTenantDirectory:
    def __init__(self, *, client: RedisClient, keys: RedisKeys) -> None:
        self._redis = client
        self._keys = keys

    async def conversations(
        self, tenant_id: str, user_id: str | None = None
    ) -> list[ConversationActivity]:
        """The tenant's (or one user's) conversations, newest activity first. One user's
        are found in the user's key registry (one read); a tenant's, or a user whose memory
        predates the registry, by a SCAN of the keyspace."""
        found: list[ConversationKey] = []
        names: list[str] = []
        if user_id is not None:
            names = await registered(self._redis, self._keys.registry(tenant_id, user_id))
            parsed = (self._keys.parse_conversation_meta(name) for name in names)
            found = [key for key in parsed if key is not None]
        if not names:  # a tenant, or a user without a registry (older memory, or none)
            pattern = self._keys.conversation_meta_pattern(tenant_id, user_id)
            async for raw in self._redis.scan_iter(match=pattern, count=500):
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
                key = self._keys.parse_conversation_meta(name)
                if key is not None and key.tenant_id == tenant_id:
                    found.append(key)
        listed: list[ConversationActivity] = []
        for start in range(0, len(found), _BATCH):
            listed.extend(await self._activity(found[start : start + _BATCH]))
        listed.sort(key=lambda c: (c.last_activity, c.key.conversation_id), reverse=True)
        return listed

    async def users(self, tenant_id: str) -> list[UserActivity]:
        """The tenant's users with a conversation in memory, newest activity first."""
        by_user: dict[str, list[ConversationActivity]] = {}
        for conversation in await self.conversations(tenant_id):
            by_user.setdefault(conversation.key.user_id, []).append(conversation)
        users = [
            UserActivity(user, max(c.last_activity for c in held), len(held))
            for user, held in by_user.items()
        ]
        users.sort(key=lambda u: (u.last_activity, u.user_id), reverse=True)
        return users

    async def _activity(self, keys: list[ConversationKey]) -> list[ConversationActivity]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zrange(self._keys.raw_trace(key), -1, -1)
                pipe.hget(self._keys.conversation_meta(key), "turn")
            replies = await pipe.execute()
        listed = []
        for index, key in enumerate(keys):
            last = cast("list[bytes]", replies[2 * index])
            turn = replies[2 * index + 1]
            if turn is None and not last:
                continue  # its meta expired (a registry keeps names until it is trimmed)
            created = ChatMessage.model_validate_json(last[0]).created_at if last else ""
            listed.append(ConversationActivity(key, created, int(turn or 0)))
        return listed
