"""Per-conversation processing lease in Redis: one event of a conversation at a time,
across every consumer process.

A lease is ``SET key token NX PX ttl``, renewed every third of its lifetime while the
holder works and released by compare-and-delete. A process that dies stops renewing, so
its conversation is free again within one lease period (``LLM_BOT_LEASE_SECONDS``). The
memory commit checks the token (fencing): a holder that lost its lease cannot write.

Holders in one process queue for a lease in the process first (first come, first
served), and only the first of them asks Redis: the memory worker's jobs of one user
(each conversation's compaction writes under the user's lease) otherwise polled Redis
while another job of the same process held it, and slept up to ``POLL_MAX_SECONDS`` after
it was let go (~250 failed ``SET``s per LongMemEval haystack of 49 sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import structlog
from redis.exceptions import RedisError

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.errors import ConversationBusy
from llm_bot.memory.conversation_key import ConversationKey

log = structlog.get_logger(__name__)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
POLL_MIN_SECONDS = 0.01
POLL_MAX_SECONDS = 0.25


@dataclass
class _Queue:
    """The holders of one lease in this process: one at a time, the others waiting."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holders: int = 0
    """Holding or waiting; the queue is dropped when none is left."""


@redis_failures_retryable
class RedisConversationLease:
    """The ``ConversationLease`` port on Redis."""

    def __init__(
        self,
        *,
        client: RedisClient,
        keys: RedisKeys,
        lease_seconds: float,
        max_wait_seconds: float,
        holder: str | None = None,
    ) -> None:
        self._redis = client
        self._keys = keys
        self._ttl_ms = int(lease_seconds * 1000)
        self._max_wait = max_wait_seconds
        self._holder = holder or uuid.uuid4().hex[:12]
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._queues: dict[str, _Queue] = {}

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[str]:
        """Wait for the conversation's lease (behind this process's earlier holders of
        it, then in Redis), keep it renewed, yield its token."""
        name = self._keys.lease(key)
        token = f"{self._holder}:{uuid.uuid4().hex}"
        deadline = asyncio.get_running_loop().time() + self._max_wait
        async with self._turn(name, deadline):
            await self._acquire(name, token, deadline)
            try:
                async with self.renewed(key, token):
                    yield token
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await self._release(keys=[name], args=[token])

    @asynccontextmanager
    async def _turn(self, name: str, deadline: float) -> AsyncIterator[None]:
        """This process's turn at the lease ``name``, waited for until ``deadline``."""
        queue = self._queues.setdefault(name, _Queue())
        queue.holders += 1
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    await queue.lock.acquire()
            except TimeoutError:
                raise ConversationBusy(
                    f"conversation busy for over {self._max_wait:.0f}s (lease held in this process)"
                ) from None
            try:
                yield
            finally:
                queue.lock.release()
        finally:
            queue.holders -= 1
            if not queue.holders:
                del self._queues[name]

    @asynccontextmanager
    async def renewed(self, key: ConversationKey, token: str) -> AsyncIterator[None]:
        """Keep a lease taken elsewhere (the fair queue takes a conversation with its
        lease) renewed while the block runs; releasing it is the taker's."""
        renewal = _Renewal(self._renew_once, self._keys.lease(key), token, self._ttl_ms / 3000)
        try:
            yield
        finally:
            await renewal.stop()

    async def _acquire(self, name: str, token: str, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        pause = POLL_MIN_SECONDS
        while True:
            if await self._redis.set(name, token, nx=True, px=self._ttl_ms):
                return
            if loop.time() >= deadline:
                raise ConversationBusy(
                    f"conversation busy for over {self._max_wait:.0f}s (lease held elsewhere)"
                )
            await asyncio.sleep(pause * (0.5 + random.random() / 2))  # noqa: S311  # jitter, not cryptography
            pause = min(pause * 2, POLL_MAX_SECONDS)

    async def _renew_once(self, name: str, token: str) -> bool:
        """Renew once; False when the lease is not held with ``token`` now, True otherwise
        (a failed renewal is tried again one interval later)."""
        try:
            renewed = await self._renew(keys=[name], args=[token, self._ttl_ms])
        except (RedisError, OSError):
            log.warning("lease.renew_failed")
            return True
        return bool(renewed)


@redis_failures_retryable
class _Renewal:
    """A lease renewed every ``interval`` seconds until stopped: a timer between renewals,
    a task only while one runs (most blocks end before the first is due, and a task per
    block cost more than the block's own bookkeeping). A lost lease is tried on: a fair
    queue taker that takes it again with the same token (before a retry) keeps it."""

    def __init__(
        self,
        renew: Callable[[str, str], Awaitable[bool]],
        name: str,
        token: str,
        interval: float,
    ) -> None:
        self._renew = renew
        self._name = name
        self._token = token
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._lost = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(interval, self._due)

    def _due(self) -> None:
        self._timer = None
        self._task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        held = await self._renew(self._name, self._token)
        if held == self._lost:
            self._lost = not held
            log.warning("lease.lost") if self._lost else log.info("lease.held_again")
        self._timer = self._loop.call_later(self._interval, self._due)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None:  # awaited even when done: a renewal's failure surfaces here
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
