"""A robust AMQP connection that reconnects to the next node of ``AMQP_URL`` each time: the
service's own (``adapters/rabbit_connection.py`` builds on it), so the client reconnects as
the service does.

aio-pika's ``RobustConnection`` reconnects by itself (and then reopens its channels,
re-declares what they declared and restarts their consumers), always to its ``url``. Each
lost connection, and each failed attempt, goes through ``_on_connection_close`` before
the next attempt; :class:`NodeRotatingConnection` moves ``url`` to the next node there, so
the next attempt goes to the next node of the process's order, round and round until one
answers. With one URL (a broker, or a load balancer) it behaves as ``RobustConnection``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aio_pika import RobustConnection
from aio_pika.abc import AbstractRobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from yarl import URL

from llm_bot.amqp_url import hosts_of, node_order, parse_amqp_url


class NodeRotatingConnection(RobustConnection):
    """A robust connection that reconnects to the next node of ``nodes`` each time."""

    def __init__(self, nodes: tuple[str, ...], **options: Any) -> None:
        super().__init__(URL(nodes[0]), **options)
        self._nodes = tuple(URL(node) for node in nodes)
        self._current = 0

    @property
    def node(self) -> str:
        """``host:port`` of the node connected to (or tried next); no credentials."""
        return hosts_of(str(self.url))

    async def _on_connection_close(self, closing: asyncio.Future[Any]) -> None:
        self._current = (self._current + 1) % len(self._nodes)
        self.url = self._nodes[self._current]
        await super()._on_connection_close(closing)


def nodes_in_process_order(amqp_url: str) -> tuple[str, ...]:
    """``AMQP_URL``'s nodes in this process's order."""
    return node_order(parse_amqp_url(amqp_url), seed=os.getpid())


async def connect_rotating(
    amqp_url: str,
    *,
    attempt_timeout: float,
    connection_class: type[NodeRotatingConnection] = NodeRotatingConnection,
    **options: Any,
) -> AbstractRobustConnection:
    """A rotating connection to the first node (in this process's order) that answers
    within ``attempt_timeout``; when none does, the last node's error is raised."""
    nodes = nodes_in_process_order(amqp_url)
    failure: BaseException | None = None
    for start in range(len(nodes)):
        connection = connection_class(nodes[start:] + nodes[:start], **options)
        try:
            await connection.connect(timeout=attempt_timeout)
        except CONNECTION_EXCEPTIONS as exc:
            failure = exc
            await connection.close()
        else:
            return connection
    assert failure is not None  # noqa: S101  # AMQP_URL names at least one node
    raise failure
