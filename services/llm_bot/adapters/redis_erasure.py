"""A user's erasure mark: how writers that read memory before or during a ``memory.forget``
learn that they must not write what they read back.

The mark is one hash under the user's hash tag (``RedisKeys.erasure``):

- ``gen``: a generation id, new at every erasure's start and end;
- ``active:<id>``: one field per erasure in progress, its value the time (Unix seconds)
  after which it counts as abandoned (a process killed mid-erasure);
- ``before`` (``before:<conversation>`` for one conversation): the time (Unix seconds) the
  ``memory.forget`` was made: an event of the user (of that conversation) made before it
  but processed after the erasure, because it waited in the fair queue or was in flight,
  is skipped, so nothing the user said before the erasure is recorded again.

A reader (the service's ``recall``, a memory job) reads the mark before it reads memory:
while an erasure is active it raises the retryable ``ErasedMeanwhile`` and backs off;
otherwise it keeps ``gen`` and every write it makes is refused unless ``gen`` is still the
same (in the write's Lua script, or under WATCH). Erasures of the same user may overlap:
the generation changes at each start and end, and readers wait while any is active. The
hash expires ``ERASURE_GUARD_SECONDS`` after the last erasure and holds no content.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.errors import ErasedMeanwhile

ERASURE_GUARD_SECONDS = 86_400
"""How long the mark outlives an erasure: far longer than any memory job (model timeout x
attempts), far shorter than anything that would keep the user around."""
ERASURE_MAX_SECONDS = 600.0
"""An erasure still marked active after this long was abandoned (its process died); its
redelivered ``memory.forget`` erases again under a new id."""
NO_ERASURE = ""
"""The generation read where the user was never erased (or the mark expired)."""


def erased_before(mark: Mapping[Any, Any], conversation_id: str) -> float:
    """The latest erasure cutoff that covers ``conversation_id`` (Unix seconds; 0: none),
    from the mark's ``HGETALL``: events made at or before it are not recorded."""
    cutoffs = (mark.get(b"before"), mark.get(f"before:{conversation_id}".encode()))
    return max((float(value) for value in cutoffs if value is not None), default=0.0)


def mark_changed(key: int = 1, arg: int = 1) -> str:
    """Lua condition, true when the mark at ``KEYS[key]`` no longer has the generation
    ``ARGV[arg]``: the guard at the top of every write script."""
    return f"(redis.call('HGET', KEYS[{key}], 'gen') or '') ~= ARGV[{arg}]"


def generation(mark: Mapping[Any, Any], *, now: float | None = None) -> str:
    """The generation to write under, from the mark's ``HGETALL`` (bytes, as the service's
    clients return them); raises ``ErasedMeanwhile`` while an erasure of the user is in
    progress."""
    now = time.time() if now is None else now
    for field, value in mark.items():
        if bytes(field).startswith(b"active:") and float(value) > now:
            raise ErasedMeanwhile("the user's memory is being erased")
    gen = mark.get(b"gen", b"")
    return bytes(gen).decode()


async def current_generation(
    client: RedisClient, keys: RedisKeys, tenant_id: str, user_id: str
) -> str:
    """The user's erasure generation as it is now (one ``HGETALL`` of the mark); raises
    ``ErasedMeanwhile`` while an erasure of the user is in progress."""
    return generation(await client.hgetall(keys.erasure(tenant_id, user_id)))


@redis_failures_retryable
class ErasureMarks:
    """Starts and ends erasures (the eraser's side of the mark)."""

    def __init__(self, *, client: RedisClient, keys: RedisKeys) -> None:
        self._redis = client
        self._keys = keys

    async def begin(
        self,
        tenant_id: str,
        user_id: str,
        *,
        before: float | None = None,
        conversation_id: str = "*",
    ) -> str:
        """Mark an erasure of the user active (new generation); returns its id. ``before``:
        when the erasure was asked for (Unix seconds): the user's events (of
        ``conversation_id``, or all) made until then are skipped when processed later."""
        erasure = uuid.uuid4().hex
        await self._write(
            tenant_id,
            user_id,
            active={erasure: time.time() + ERASURE_MAX_SECONDS},
            before=(conversation_id, before) if before is not None else None,
        )
        return erasure

    async def end(self, tenant_id: str, user_id: str, erasure: str) -> None:
        """The erasure is over, done or failed (new generation either way)."""
        await self._write(tenant_id, user_id, done=erasure)

    async def _write(
        self,
        tenant_id: str,
        user_id: str,
        *,
        active: Mapping[str, float] | None = None,
        done: str | None = None,
        before: tuple[str, float] | None = None,
    ) -> None:
        name = self._keys.erasure(tenant_id, user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            fields: dict[Any, Any] = {"gen": uuid.uuid4().hex}  # redis-py wants its own unions
            for erasure, deadline in (active or {}).items():
                fields[f"active:{erasure}"] = deadline
            if before is not None:
                conversation, at = before
                fields["before" if conversation == "*" else f"before:{conversation}"] = at
            pipe.hset(name, mapping=fields)
            if done is not None:
                pipe.hdel(name, f"active:{done}")
            pipe.expire(name, ERASURE_GUARD_SECONDS)
            await pipe.execute()
