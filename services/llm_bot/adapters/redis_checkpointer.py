"""LangGraph checkpoints on plain Redis (no modules), for durable flows (SPEC 5.10).

One Redis hash per thread, its name given by ``thread_key`` (llm-bot puts a conversation's
flow under its user's hash tag, so it lives in the user's slot and is erased with the user;
one key per thread also makes every write one atomic transaction and deleting a thread one
``DEL``). Fields, separated by ``\\x1f`` (LangGraph's namespaces contain ``|``):

    c \\x1f <ns> \\x1f <checkpoint id>                       the checkpoint, its metadata, its parent
    w \\x1f <ns> \\x1f <checkpoint id> \\x1f <task> \\x1f <idx>   one pending write

Values are JSON envelopes of the serializer's typed bytes (base64). Checkpoints keep their
channel values inline: a flow's state is a few answers, so the per-version blob store other
savers use to share large values between checkpoints would cost more than it saves. Every
write refreshes the hash's TTL (``ttl_seconds``), so an abandoned thread goes away by
itself. Checked against ``langgraph-checkpoint-conformance`` (base capabilities).

Why not an existing saver: ``langgraph-checkpoint-redis`` needs the RedisJSON and
RediSearch modules; ``langgraph-checkpoint-aws``'s Valkey saver brings a second Redis client
(valkey-glide); ``langgraph-checkpoint-plainredis`` (alpha) keeps a global thread registry
and sequence key beside per-thread keys, so a write spans slots (not atomic in Redis Cluster)
and a user's checkpoints cannot be found under the user's hash tag.
"""

from __future__ import annotations

import base64
import builtins
import json
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_errors import (
    redis_failures_as_unavailable,
    redis_failures_retryable,
)

SEP = "\x1f"


@redis_failures_retryable
class RedisCheckpointSaver(BaseCheckpointSaver[str]):
    """Async LangGraph checkpointer on plain Redis; one hash per thread. Redis failures
    become ``MemoryUnavailable`` (retried like every memory failure)."""

    def __init__(
        self,
        client: RedisClient,
        *,
        thread_key: Callable[[str], str],
        ttl_seconds: int | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self._client = client
        self._thread_key = thread_key
        self._ttl = ttl_seconds

    # ------------------------------------------------------------------ reads

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        stored = await self._load(thread_id)
        checkpoints = stored.checkpoints.get(ns, {})
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            if not checkpoints:
                return None
            checkpoint_id = max(checkpoints)
        elif checkpoint_id not in checkpoints:
            return None
        return self._tuple(thread_id, ns, checkpoint_id, stored)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002  # LangGraph's parameter name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The thread's checkpoints, newest first (a thread is required: there is no
        global listing across users' slots)."""
        if config is None:
            raise ValueError("RedisCheckpointSaver lists one thread's checkpoints: pass its config")
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        wanted_ns = configurable.get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        with redis_failures_as_unavailable("RedisCheckpointSaver.alist"):
            stored = await self._load(thread_id)
        left = limit
        for ns, checkpoints in stored.checkpoints.items():
            if wanted_ns is not None and ns != wanted_ns:
                continue
            for checkpoint_id in sorted(checkpoints, reverse=True):
                if wanted_id and checkpoint_id != wanted_id:
                    continue
                if before_id and checkpoint_id >= before_id:
                    continue
                metadata = self._typed(checkpoints[checkpoint_id]["md"])
                if filter and any(metadata.get(k) != v for k, v in filter.items()):
                    continue
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield self._tuple(thread_id, ns, checkpoint_id, stored)

    # ------------------------------------------------------------------ writes

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        value = json.dumps(
            {
                "cp": self._pack(checkpoint),
                "md": self._pack(get_checkpoint_metadata(config, metadata)),
                "parent": configurable.get("checkpoint_id"),
            }
        )
        key = self._thread_key(thread_id)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(key, SEP.join(("c", ns, checkpoint["id"])), value)
            self._expire(pipe, key)
            await pipe.execute()
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Regular writes are kept once per (task, index) (a replayed task does not change
        them); special ones (error, interrupt, resume, scheduled) are replaced."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = str(configurable["checkpoint_id"])
        key = self._thread_key(thread_id)
        async with self._client.pipeline(transaction=True) as pipe:
            for idx, (channel, value) in enumerate(writes):
                index = WRITES_IDX_MAP.get(channel, idx)
                name = SEP.join(("w", ns, checkpoint_id, task_id, str(index)))
                body = json.dumps(
                    {"task": task_id, "ch": channel, "v": self._pack(value), "path": task_path}
                )
                if index >= 0:
                    pipe.hsetnx(key, name, body)
                else:
                    pipe.hset(key, name, body)
            self._expire(pipe, key)
            await pipe.execute()

    async def adelete_thread(self, thread_id: str) -> None:
        await self._client.delete(self._thread_key(thread_id))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Monotonic versions ``<n>.<random>`` as LangGraph's in-memory saver makes them."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"  # noqa: S311  # a tie-breaker

    # ------------------------------------------------------------------ sync API

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError("RedisCheckpointSaver is async only: use aget_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        raise NotImplementedError("RedisCheckpointSaver is async only: use alist")

    # ------------------------------------------------------------------ internals

    def _expire(self, pipe: Any, key: str) -> None:
        if self._ttl:
            pipe.expire(key, self._ttl)

    def _pack(self, value: Any) -> builtins.list[str]:
        kind, data = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    def _typed(self, packed: builtins.list[str]) -> Any:
        return self.serde.loads_typed((packed[0], base64.b64decode(packed[1])))

    async def _load(self, thread_id: str) -> _Thread:
        raw = await self._client.hgetall(self._thread_key(thread_id))
        thread = _Thread()
        for field_name, body in raw.items():
            parts = _text(field_name).split(SEP)
            value = json.loads(body)
            if parts[0] == "c" and len(parts) == 3:
                thread.checkpoints.setdefault(parts[1], {})[parts[2]] = value
            elif parts[0] == "w" and len(parts) == 5:
                writes = thread.writes.setdefault((parts[1], parts[2]), [])
                writes.append((value.get("path", ""), parts[3], int(parts[4]), value))
        return thread

    def _tuple(
        self, thread_id: str, ns: str, checkpoint_id: str, stored: _Thread
    ) -> CheckpointTuple:
        saved = stored.checkpoints[ns][checkpoint_id]
        writes = sorted(stored.writes.get((ns, checkpoint_id), []), key=lambda w: w[:3])
        parent = saved.get("parent")
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=self._typed(saved["cp"]),
            metadata=self._typed(saved["md"]),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[(w["task"], w["ch"], self._typed(w["v"])) for *_, w in writes],
        )


class _Thread:
    """One thread's hash, parsed: checkpoints by namespace and id, writes by both."""

    def __init__(self) -> None:
        self.checkpoints: dict[str, dict[str, dict[str, Any]]] = {}
        self.writes: dict[tuple[str, str], list[tuple[str, str, int, dict[str, Any]]]] = {}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
