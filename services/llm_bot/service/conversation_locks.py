"""In-process, per-conversation FIFO locks (one event of a conversation at a time here)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from llm_bot.memory.conversation_key import ConversationKey


@dataclass
class ConversationLocks:
    """A lock per conversation, removed when nobody holds or waits for it."""

    locks: dict[ConversationKey, asyncio.Lock] = field(default_factory=dict)
    users: dict[ConversationKey, int] = field(default_factory=dict)

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        lock = self.locks.setdefault(key, asyncio.Lock())
        self.users[key] = self.users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self.users[key] -= 1
            if self.users[key] == 0:
                del self.users[key]
                del self.locks[key]
