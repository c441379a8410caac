"""The Redis client for ``REDIS_URL``: one server, a Redis Cluster, or Sentinel (SPEC 7.2).

Forms of ``REDIS_URL``:

- ``redis://host:6379/0`` (or ``rediss://``, ``unix://``): one server, **or any node of a
  Redis Cluster**: cluster mode is detected when the client is built (``INFO cluster``),
  and a cluster client (``redis.asyncio.RedisCluster``) follows MOVED/ASK, failovers and
  resharding from there on;
- ``redis://node-a:6379,redis://node-b:6379,...``: several nodes of one cluster, tried in
  turn at start (the client needs one of them up, then learns the whole cluster);
- ``redis+sentinel://[:password@]sentinel-a:26379,sentinel-b:26379/<service>[/<db>]``:
  the master of ``<service>`` as the Sentinels name it, followed across their failovers.

Every multi-key command and script of llm-bot touches one slot (``redis_keys.py``), so
the same adapters run on all three. Cluster mode is detected synchronously, once, when a
process builds its client (before it serves anything).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias, cast
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.retry import Retry
from redis.typing import EncodableT

from llm_bot.redis_url import RedisTarget, parse_redis_url

RedisClient: TypeAlias = "aioredis.Redis | RedisCluster"
"""What the adapters hold: a client of one server (or Sentinel's master) or of a cluster."""

AnyPipeline: TypeAlias = "Pipeline | ClusterPipeline"

SOCKET_TIMEOUT_SECONDS = 5.0
HEALTH_CHECK_SECONDS = 15
CLUSTER_RETRIES = 6
"""Attempts a cluster command gets across a failover (about 3 s of backoff in all): the
replica takes over after ``cluster-node-timeout`` when a master dies."""


def connect_redis(url: str) -> RedisClient:
    """The client for ``url`` (see the module's docstring). Nothing is sent but the
    detection of cluster mode; when no node answers it, a single-server client is
    returned and the caller's first command reports Redis unreachable."""
    target = parse_redis_url(url)
    if target.kind == "sentinel":
        return _sentinel_master(target)
    if len(target.urls) > 1:
        return _cluster(target.urls)
    if _cluster_enabled(target.urls[0]):
        return _cluster(target.urls)
    return aioredis.from_url(
        target.urls[0],
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=HEALTH_CHECK_SECONDS,
    )


def queue_script(
    pipe: AnyPipeline, script: AsyncScript, keys: Sequence[str], args: Sequence[EncodableT]
) -> None:
    """Queue ``script`` in ``pipe`` as ``EVAL`` with its body (Redis caches it by digest):
    no ``SCRIPT EXISTS`` round trip before the pipeline, as redis-py's own pipeline sends
    for ``EVALSHA`` on one server, and nothing to load on a cluster, whose pipeline loads
    no scripts (and a replica promoted by a failover has an empty script cache). One
    round trip fewer per reply for about 1.5 kB more (docs/benchmarks-notebook.md)."""
    pipe.eval(cast("str", script.script), len(keys), *keys, *args)


def _cluster_enabled(url: str) -> bool:
    probe = redis.Redis.from_url(
        url, socket_timeout=SOCKET_TIMEOUT_SECONDS, socket_connect_timeout=SOCKET_TIMEOUT_SECONDS
    )
    try:
        info: dict[str, Any] = probe.info("cluster")
    except (redis.RedisError, OSError):
        return False
    finally:
        probe.close()
    return bool(int(info.get("cluster_enabled", 0)))


def _cluster(urls: tuple[str, ...]) -> RedisCluster:
    first = urlsplit(urls[0])
    if first.path not in ("", "/", "/0"):
        raise ValueError("a Redis Cluster has only database 0: REDIS_URL must end in /0")
    options: dict[str, Any] = {
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": SOCKET_TIMEOUT_SECONDS,
        "health_check_interval": HEALTH_CHECK_SECONDS,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), CLUSTER_RETRIES),
    }
    if len(urls) == 1:
        return RedisCluster.from_url(urls[0], **options)
    nodes = [ClusterNode(urlsplit(u).hostname or "", urlsplit(u).port or 6379) for u in urls]
    return RedisCluster(
        startup_nodes=nodes,
        username=unquote(first.username) if first.username else None,
        password=unquote(first.password) if first.password else None,
        ssl=first.scheme == "rediss",
        **options,
    )


def _sentinel_master(target: RedisTarget) -> aioredis.Redis:
    sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        list(target.sentinels),
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
        username=target.username,
        password=target.password,
        db=target.db,
    )
    master: aioredis.Redis = sentinel.master_for(
        target.service,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=HEALTH_CHECK_SECONDS,
    )
    return master
