"""``AMQP_URL``: its forms, parsed and checked (connections are made in
``adapters/rabbit_connection.py``).

One URL names a broker or a load balancer in front of a cluster. Several URLs separated by
commas name the nodes of one RabbitMQ cluster: a process connects to one of them, in an
order shuffled per process (so replicas spread over the nodes), and when that connection
is lost it reconnects to the next node of its order. A comma inside a password is written
``%2C``.
"""

from __future__ import annotations

import random
from urllib.parse import urlsplit

SCHEMES = ("amqp", "amqps")
EXAMPLE = "amqp://user:password@rmq-0:5672/"


def parse_amqp_url(value: str) -> tuple[str, ...]:
    """The node URLs of ``AMQP_URL`` (one or more); ValueError naming the bad entry (never
    its password) and the form expected."""
    nodes = tuple(part.strip() for part in value.split(","))
    for position, url in enumerate(nodes, start=1):
        _check_node_url(url, position=position, count=len(nodes))
    return nodes


def node_order(nodes: tuple[str, ...], *, seed: int) -> tuple[str, ...]:
    """``nodes`` shuffled by ``seed`` (a process passes its pid): the same order for every
    connection of one process, a different start node for different processes."""
    order = list(nodes)
    random.Random(seed).shuffle(order)  # noqa: S311  # spreading load, not a secret
    return tuple(order)


def hosts_of(value: str) -> str:
    """``host:port`` of each node of ``AMQP_URL``, comma-separated, never a credential."""
    return ", ".join(_host_port(url.strip()) for url in value.split(","))


def _host_port(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
    except ValueError:
        return "?"
    return f"{parts.hostname or '?'}:{port}"


def _check_node_url(url: str, *, position: int, count: int) -> None:
    which = f"node {position} of {count}" if count > 1 else "the URL"
    if not url:
        raise ValueError(
            f"{which} is empty; expected {EXAMPLE}, or several such URLs separated by commas"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{which} is not a URL ({exc}); expected e.g. {EXAMPLE}") from exc
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ValueError(
            f"{which} is not an amqp:// or amqps:// URL with a host; expected e.g. {EXAMPLE}, "
            "or several such URLs (the nodes of one cluster) separated by commas"
        )
