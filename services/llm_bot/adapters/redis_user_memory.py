"""One user's memory read out of Redis as plain data, and written back (``llm-bot memory
export`` / ``import``; format in docs/memory.md "Export and import").

What is read: per conversation its window (``wm``), meta, raw trace and running flow, with
when each key expires and the conversation's entries in the activity, tool-round and flow
schedules; the user's long-term profile, facts (with their history and sources), episodes,
notable events and bundle, with when they expire and when the user is next due for
retention. Not read: what only serves processing in flight (leases, the fair queue's
waiting events, processed-event and job markers) and the retrieval index (its entries are
read by ``RedisRecallIndex.entries`` and re-embedded on import).

Writing a user back is one MULTI/EXEC that WATCHes the user's erasure mark: refused
(``ErasedMeanwhile``) while an erasure is in progress or when one happened since the
generation was read. Each key written replaces the key of that name (so importing twice
leaves the same memory); keys of the user the data does not name are left alone.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, cast

from redis.exceptions import ResponseError, WatchError

from llm_bot.adapters.redis_connection import AnyPipeline, RedisClient
from llm_bot.adapters.redis_erasure import generation
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys, activity_member, user_member
from llm_bot.adapters.redis_registry import registered
from llm_bot.errors import ErasedMeanwhile, MemoryUnavailable
from llm_bot.memory.conversation_key import ConversationKey

LONG_TERM_KINDS = ("profile", "facts", "episodes", "events")
CONVERSATION_SCHEDULES = {"activity_at": "activity", "tool_round_due_at": "tool_rounds"}
CONVERSATION_SCHEDULES["flow_due_at"] = "flows"


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _json(raw: bytes | str) -> Any:
    return json.loads(raw)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _field_value(raw: bytes) -> str | dict[str, str]:
    """A hash value as text, or ``{"base64": ...}`` when it is not UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def _raw_value(value: str | dict[str, str]) -> bytes | str:
    return base64.b64decode(value["base64"]) if isinstance(value, dict) else value


@redis_failures_retryable
class RedisUserMemory:
    """Reads and writes one user's memory as the plain data of the export format."""

    def __init__(self, *, client: RedisClient, keys: RedisKeys) -> None:
        self._redis = client
        self._keys = keys
        self._exact_expiry: bool | None = None
        """Whether Redis has PEXPIRETIME (7.0+): the exact expiry, not now + PTTL."""

    async def _expiries_exact(self) -> bool:
        if self._exact_expiry is None:
            try:
                await self._redis.pexpiretime(self._keys.registry("probe", "probe"))
                self._exact_expiry = True
            except ResponseError:
                self._exact_expiry = False
        return self._exact_expiry

    def _queue_expiry(self, pipe: AnyPipeline, name: str) -> None:
        if self._exact_expiry:
            pipe.pexpiretime(name)
        else:
            pipe.pttl(name)

    def _expiry(self, now_ms: int, reply: Any) -> int | None:
        """When a key expires (Unix ms); None without an expiry or a key."""
        value = int(reply)
        if value <= 0:
            return None
        return value if self._exact_expiry else now_ms + value

    async def users(self, tenant_id: str) -> list[str]:
        """Every user of the tenant with memory in Redis, sorted (one SCAN over every
        master; the ids only are kept)."""
        head = f"{self._keys.prefix}:{{{tenant_id}|"
        found: set[str] = set()
        async for raw in self._redis.scan_iter(
            match=self._keys.tenant_pattern(tenant_id), count=1000
        ):
            name = _text(raw)
            user, sep, _ = name[len(head) :].partition("}:")
            if sep and name.startswith(head):
                found.add(user)
        return sorted(found)

    async def read(self, tenant_id: str, user_id: str) -> dict[str, Any]:
        """The user's memory as plain data (see the module), without the index."""
        keys = self._keys
        await self._expiries_exact()
        names = await registered(self._redis, keys.registry(tenant_id, user_id))
        conversations = sorted(
            {key.conversation_id for key in map(keys.parse_conversation_key, names) if key},
        )
        now_ms = int(time.time() * 1000)
        out: dict[str, Any] = {"conversations": []}
        for conversation in conversations:
            key = ConversationKey(tenant_id, user_id, conversation)
            out["conversations"].append(await self._conversation(key, now_ms))
        out["conversations"] = [c for c in out["conversations"] if c is not None]
        out["long_term"] = await self._long_term(tenant_id, user_id, now_ms)
        retention = keys.retention_schedule()
        member = user_member(tenant_id, user_id)
        out["retention_due_at"] = await self._redis.zscore(retention.of(member), member)
        return out

    async def _conversation(self, key: ConversationKey, now_ms: int) -> dict[str, Any] | None:
        keys = self._keys
        names = {
            "window": keys.working_memory(key),
            "meta": keys.conversation_meta(key),
            "trace": keys.raw_trace(key),
            "flow": keys.flow(key),
        }
        member = activity_member(key)
        schedules = {field: getattr(keys, kind)() for field, kind in CONVERSATION_SCHEDULES.items()}
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(names["window"])
            pipe.hgetall(names["meta"])
            pipe.zrange(names["trace"], 0, -1, withscores=True)
            pipe.hgetall(names["flow"])
            for name in names.values():
                self._queue_expiry(pipe, name)
            window, meta, trace, flow, *expiries = await pipe.execute()
        if not (window or meta or trace or flow):
            return None
        scheduled: dict[str, float | None] = {}
        for field, schedule in schedules.items():
            scheduled[field] = await self._redis.zscore(schedule.of(member), member)
        expires = dict(zip(names, (self._expiry(now_ms, e) for e in expiries), strict=True))
        return {
            "id": key.conversation_id,
            "window": _json(window) if window else None,
            "meta": {_text(f): _text(v) for f, v in cast("dict[bytes, bytes]", meta).items()},
            "trace": [{"score": int(score), "message": _json(m)} for m, score in trace],
            "flow": (
                {_text(f): _field_value(v) for f, v in cast("dict[bytes, bytes]", flow).items()}
                if flow
                else None
            ),
            "expires_at": {part: at for part, at in expires.items() if at is not None},
            **scheduled,
        }

    async def _long_term(self, tenant_id: str, user_id: str, now_ms: int) -> dict[str, Any]:
        keys = self._keys
        async with self._redis.pipeline(transaction=False) as pipe:
            for kind in LONG_TERM_KINDS:
                pipe.hgetall(keys.long_term(tenant_id, user_id, kind))
            pipe.get(keys.long_term(tenant_id, user_id, "bundle"))
            for kind in (*LONG_TERM_KINDS, "bundle"):
                self._queue_expiry(pipe, keys.long_term(tenant_id, user_id, kind))
            results = await pipe.execute()
        hashes = results[: len(LONG_TERM_KINDS)]
        bundle = results[len(LONG_TERM_KINDS)]
        expiries = results[len(LONG_TERM_KINDS) + 1 :]
        out: dict[str, Any] = {
            kind: {_text(f): _json(v) for f, v in cast("dict[bytes, bytes]", items).items()}
            for kind, items in zip(LONG_TERM_KINDS, hashes, strict=True)
        }
        out["bundle"] = _json(bundle) if bundle else None
        expires = {
            kind: self._expiry(now_ms, ttl)
            for kind, ttl in zip((*LONG_TERM_KINDS, "bundle"), expiries, strict=True)
        }
        out["expires_at"] = {kind: at for kind, at in expires.items() if at is not None}
        return out

    async def erasure(self, tenant_id: str, user_id: str) -> str:
        """The user's erasure generation; ``ErasedMeanwhile`` while an erasure runs."""
        return generation(await self._redis.hgetall(self._keys.erasure(tenant_id, user_id)))

    async def write(
        self, tenant_id: str, user_id: str, memory: dict[str, Any], *, erasure: str
    ) -> int:
        """Write ``memory`` (as :meth:`read` returns it) for the user, in one transaction
        under the erasure generation ``erasure``; returns the keys written. Keys whose
        expiry has passed are not written."""
        writes = _planned_writes(self._keys, tenant_id, user_id, memory, int(time.time() * 1000))
        mark = self._keys.erasure(tenant_id, user_id)
        registry = self._keys.registry(tenant_id, user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            await pipe.watch(mark)
            if generation(await pipe.hgetall(mark)) != erasure:
                raise ErasedMeanwhile("import refused: the user was erased meanwhile")
            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            for write in writes:
                write.queue(pipe)
            _queue_registration(pipe, registry, writes)
            try:
                await pipe.execute()
            except WatchError as exc:
                raise MemoryUnavailable(
                    "the user's erasure mark changed during the import"
                ) from exc
        await self._schedule(tenant_id, user_id, memory)
        return len(writes)

    async def _schedule(self, tenant_id: str, user_id: str, memory: dict[str, Any]) -> None:
        """The user's entries in the schedules (other slots, so after the transaction)."""
        keys = self._keys
        async with self._redis.pipeline(transaction=False) as pipe:
            for conversation in memory.get("conversations", []):
                member = activity_member(ConversationKey(tenant_id, user_id, conversation["id"]))
                for field, kind in CONVERSATION_SCHEDULES.items():
                    at = conversation.get(field)
                    if at is not None:
                        pipe.zadd(getattr(keys, kind)().of(member), {member: float(at)})
            due = memory.get("retention_due_at")
            if due is not None:
                member = user_member(tenant_id, user_id)
                pipe.zadd(keys.retention_schedule().of(member), {member: float(due)})
            await pipe.execute()


class _Write:
    """One key to replace: its name, its type and content, when it expires (ms)."""

    def __init__(self, name: str, kind: str, content: Any, expires_at: int | None) -> None:
        self.name = name
        self.kind = kind
        self.content = content
        self.expires_at = expires_at

    def queue(self, pipe: AnyPipeline) -> None:
        pipe.delete(self.name)
        if self.kind == "string":
            pipe.set(self.name, self.content)
        elif self.kind == "hash":
            pipe.hset(self.name, mapping=self.content)
        else:
            pipe.zadd(self.name, self.content)
        if self.expires_at is not None:
            pipe.pexpireat(self.name, self.expires_at)


def _planned_writes(
    keys: RedisKeys, tenant_id: str, user_id: str, memory: dict[str, Any], now_ms: int
) -> list[_Write]:
    writes: list[_Write] = []

    def add(name: str, kind: str, content: Any, expires_at: int | None) -> None:
        if content and (expires_at is None or expires_at > now_ms):
            writes.append(_Write(name, kind, content, expires_at))

    for conversation in memory.get("conversations", []):
        key = ConversationKey(tenant_id, user_id, conversation["id"])
        expires = conversation.get("expires_at", {})
        window = conversation.get("window")
        add(
            keys.working_memory(key),
            "string",
            _dumps(window) if window is not None else None,
            expires.get("window"),
        )
        add(keys.conversation_meta(key), "hash", conversation.get("meta"), expires.get("meta"))
        trace = {_dumps(m["message"]): int(m["score"]) for m in conversation.get("trace", [])}
        add(keys.raw_trace(key), "zset", trace, expires.get("trace"))
        flow = conversation.get("flow") or {}
        add(
            keys.flow(key),
            "hash",
            {field: _raw_value(value) for field, value in flow.items()},
            expires.get("flow"),
        )
    long_term = memory.get("long_term", {})
    expires = long_term.get("expires_at", {})
    for kind in LONG_TERM_KINDS:
        items = {item_id: _dumps(item) for item_id, item in long_term.get(kind, {}).items()}
        add(keys.long_term(tenant_id, user_id, kind), "hash", items, expires.get(kind))
    bundle = long_term.get("bundle")
    add(
        keys.long_term(tenant_id, user_id, "bundle"),
        "string",
        _dumps(bundle) if bundle is not None else None,
        expires.get("bundle"),
    )
    return writes


def _queue_registration(pipe: AnyPipeline, registry: str, writes: list[_Write]) -> None:
    """The conversations' keys (names with ids) in the user's key registry, so an erasure
    finds them; scored by when they expire, as ``redis_registry`` scores them."""
    far = int(time.time()) + 10 * 365 * 86400
    scored = {
        write.name: (write.expires_at // 1000 if write.expires_at else far)
        for write in writes
        if ":ltm:" not in write.name
    }
    if scored:
        ttl = max(1, max(scored.values()) - int(time.time()))
        pipe.zadd(registry, scored, gt=True)
        pipe.expire(registry, ttl, nx=True)  # a new registry
        pipe.expire(registry, ttl, gt=True)  # never shortened: it outlives what it names
