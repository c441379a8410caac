"""``REDIS_URL``: its forms, parsed and checked (the client is built in
``adapters/redis_connection.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

SENTINEL_SCHEME = "redis+sentinel"
NODE_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class RedisTarget:
    """``REDIS_URL`` parsed: what to connect to."""

    kind: Literal["nodes", "sentinel"]
    urls: tuple[str, ...] = ()
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_redis_url(value: str) -> RedisTarget:
    """Parse ``REDIS_URL``; ValueError (naming the form expected) on anything else."""
    if value.startswith(f"{SENTINEL_SCHEME}://"):
        return _sentinel_target(value)
    urls = tuple(part.strip() for part in value.split(","))
    for url in urls:
        _check_node_url(url)
    if len(urls) > 1 and any(urlsplit(url).scheme == "unix" for url in urls):
        raise ValueError("a list of Redis nodes takes redis:// or rediss:// URLs, not unix://")
    return RedisTarget(kind="nodes", urls=urls)


def _check_node_url(url: str) -> None:
    example = "redis://host:6379/0"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc}); expected e.g. {example}") from exc
    if parts.scheme not in NODE_SCHEMES or not (parts.hostname or parts.scheme == "unix"):
        raise ValueError(
            f"expected a redis://, rediss:// or unix:// URL such as {example}, several of "
            f"them separated by commas (nodes of one cluster), or {SENTINEL_SCHEME}://"
            "sentinel:26379/<service>"
        )


def _sentinel_target(value: str) -> RedisTarget:
    example = f"{SENTINEL_SCHEME}://sentinel-a:26379,sentinel-b:26379/mymaster/0"
    rest = value[len(f"{SENTINEL_SCHEME}://") :]
    credentials, _, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    parts = [part for part in path.split("/") if part]
    if not hosts or not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError(f"expected a Sentinel URL such as {example}")
    sentinels = []
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not name or not port.isdigit():
            raise ValueError(f"Sentinel {host!r} is not host:port; expected e.g. {example}")
        sentinels.append((name, int(port)))
    username, _, password = credentials.partition(":")
    return RedisTarget(
        kind="sentinel",
        sentinels=tuple(sentinels),
        service=parts[0],
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
    )
