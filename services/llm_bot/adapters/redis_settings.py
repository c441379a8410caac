"""What Redis keeps and what it may throw away: the persistence and eviction settings of
every master behind ``REDIS_URL`` (SPEC 7.2.1), read with ``CONFIG GET``.

:func:`read_node_settings` returns one :class:`NodeSettings` per master (one server, the
master Sentinel names, or every master of a cluster), each with the facts a caller acts
on: whether it can evict llm-bot's keys, whether it persists at all, whether it is durable
(AOF with an fsync at least every second). A node that refuses ``CONFIG GET`` (a managed
Redis renames or forbids it) is returned with ``readable`` False and its reason. The
rule applied at start is ``entrypoints/redis_durability.py``; anything else that needs to
know whether memory survives a restart reads the same facts here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError, ResponseError

from llm_bot.adapters.redis_connection import RedisClient

SETTINGS = ("appendonly", "appendfsync", "save", "maxmemory-policy")
"""What is read from every master."""
SAFE_EVICTION = "noeviction"
"""The only ``maxmemory-policy`` under which Redis never deletes a key by itself: every
other one (``allkeys-*``, ``volatile-*``) may drop a user's memory, a lease or waiting
work when memory runs short (``volatile-*`` too: almost every key of llm-bot has a TTL)."""
DURABLE_FSYNC = frozenset({"everysec", "always"})


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """One master's settings as read (``values``: setting -> value), or why not."""

    node: str
    """``host:port`` of the master (``sentinel:<service>`` behind Sentinel)."""
    values: dict[str, str]
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.error is None

    @property
    def eviction_policy(self) -> str:
        return self.values.get("maxmemory-policy", "")

    @property
    def can_evict(self) -> bool:
        """True when Redis may delete keys by itself under memory pressure."""
        return self.readable and self.eviction_policy != SAFE_EVICTION

    @property
    def aof(self) -> bool:
        return self.values.get("appendonly", "no") == "yes"

    @property
    def snapshots(self) -> bool:
        """RDB snapshots are configured (``save`` is not empty)."""
        return bool(self.values.get("save", "").strip())

    @property
    def persists(self) -> bool:
        """Anything at all survives a restart (AOF or RDB snapshots)."""
        return self.aof or self.snapshots

    @property
    def durable(self) -> bool:
        """A restart or host crash loses at most about a second of writes: AOF on, fsync
        ``everysec`` or ``always``."""
        return self.aof and self.values.get("appendfsync", "") in DURABLE_FSYNC


async def read_node_settings(client: RedisClient, *, label: str) -> list[NodeSettings]:
    """The settings of every master behind ``client``; ``label`` names a single server or
    Sentinel's master (a cluster's masters are named by their own addresses). Raises
    ``RedisError`` only when a node cannot be reached at all."""
    if isinstance(client, RedisCluster):
        await client.initialize()  # learns the slots and their masters (once per client)
        return [await _read_cluster_node(client, node) for node in client.get_primaries()]
    return [await _read(label, client.execute_command)]


async def _read_cluster_node(client: RedisCluster, node: ClusterNode) -> NodeSettings:
    async def command(*args: str) -> Any:
        return await client.execute_command(*args, target_nodes=node)

    return await _read(f"{node.host}:{node.port}", command)


async def _read(node: str, command: Any) -> NodeSettings:
    values: dict[str, str] = {}
    for name in SETTINGS:  # one at a time: CONFIG GET of several names is Redis 7+
        try:
            reply = await command("CONFIG", "GET", name)
        except ResponseError as exc:  # unknown command, renamed, or not permitted (ACL)
            return NodeSettings(node=node, values=values, error=_first_line(exc))
        values.update(_pairs(reply))
    return NodeSettings(node=node, values=values)


def _pairs(reply: Any) -> dict[str, str]:
    """``CONFIG GET``'s reply (a flat list, or a dict with RESP3 / redis-py's parsing)."""
    if isinstance(reply, dict):
        items = list(reply.items())
    else:
        flat = list(reply)
        items = list(zip(flat[::2], flat[1::2], strict=True))
    return {_text(name): _text(value) for name, value in items}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _first_line(exc: RedisError) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
