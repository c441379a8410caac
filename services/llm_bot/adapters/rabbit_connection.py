"""Connections to RabbitMQ, to one broker or to any node of a cluster (``AMQP_URL``'s forms
are in ``amqp_url.py``).

How a robust connection moves from node to node is in ``llm_bot/client/connection.py``
(the client reconnects by the same code); here it logs each reconnection, and the
connects fail after a timeout, reported as one line.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractConnection, AbstractRobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from aiormq.exceptions import AMQPConnectionError

from llm_bot.client.connection import NodeRotatingConnection as RotatingBase
from llm_bot.client.connection import connect_rotating as rotating
from llm_bot.client.connection import nodes_in_process_order

log = structlog.get_logger(__name__)


class NodeRotatingConnection(RotatingBase):
    """The client's rotating connection, logging each reconnection."""

    async def _on_connected(self) -> None:
        await super()._on_connected()
        if self.connection_attempt > 1:
            log.info("amqp.reconnected", node=self.node)


async def connect_rotating(
    amqp_url: str, *, attempt_timeout: float, **options: Any
) -> AbstractRobustConnection:
    """A :class:`NodeRotatingConnection` to the first node (in this process's order) that
    answers within ``attempt_timeout``; when none does, the last node's error is raised."""
    return await rotating(
        amqp_url,
        attempt_timeout=attempt_timeout,
        connection_class=NodeRotatingConnection,
        **options,
    )


async def connect_first_node(
    amqp_url: str, *, attempt_timeout: float, **options: Any
) -> AbstractConnection:
    """A plain connection (no reconnect: for commands) to the first node (in this process's
    order) that answers within ``attempt_timeout``; when none does, the last node's error."""
    failure: BaseException | None = None
    for node in nodes_in_process_order(amqp_url):
        try:
            connection: AbstractConnection = await aio_pika.connect(
                node, timeout=attempt_timeout, **options
            )
        except CONNECTION_EXCEPTIONS as exc:
            failure = exc
        else:
            return connection
    assert failure is not None  # noqa: S101  # AMQP_URL names at least one node
    raise failure


CONNECT_TIMEOUT_SECONDS = 15.0
"""A first AMQP connect that gets no answer (a firewall, a port that is not RabbitMQ's)
fails after this long instead of hanging."""


class AmqpNoAnswer(AMQPConnectionError):
    """Nothing answered as RabbitMQ within ``CONNECT_TIMEOUT_SECONDS``."""


async def connect_amqp(url: str, **options: Any) -> AbstractConnection:
    """A connection (no reconnect) to ``AMQP_URL``'s first node that answers, with a timeout
    per node; a failure is reported by the caller as one line."""
    with quiet_connect_errors(), _no_answer_as_error():
        return await connect_first_node(url, attempt_timeout=CONNECT_TIMEOUT_SECONDS, **options)


async def connect_amqp_robust(url: str, **options: Any) -> AbstractRobustConnection:
    """A robust connection to ``AMQP_URL`` that reconnects to the next node when its node is
    lost, with a timeout per attempt, reported like ``connect_amqp``."""
    with quiet_connect_errors(), _no_answer_as_error():
        return await connect_rotating(url, attempt_timeout=CONNECT_TIMEOUT_SECONDS, **options)


@contextlib.contextmanager
def _no_answer_as_error() -> Iterator[None]:
    try:
        yield
    except TimeoutError as exc:
        raise AmqpNoAnswer(f"no answer within {CONNECT_TIMEOUT_SECONDS:g} s") from exc


@contextlib.contextmanager
def quiet_connect_errors() -> Iterator[None]:
    """aiormq logs a failed first connect (a JSON line) before raising it; the caller
    reports the failure itself, as one line, so that log is held back meanwhile."""
    logger = logging.getLogger("aiormq.connection")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
