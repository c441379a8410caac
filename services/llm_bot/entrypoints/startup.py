"""Start-up checks and failures to reach a dependency, as one clear line naming the fix."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from urllib.parse import urlsplit

from aiormq.exceptions import (
    AMQPConnectionError,
    AuthenticationError,
    IncompatibleProtocolError,
    InvalidFrameError,
    ProbableAuthenticationError,
)
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import AuthenticationWrongNumberOfArgsError, RedisError, ResponseError

from llm_bot.adapters.rabbit_connection import AmqpNoAnswer
from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.amqp_url import hosts_of
from llm_bot.config import BrokerConfig, RedisConfig
from llm_bot.errors import DependencyUnavailable


async def check_redis(client: RedisClient) -> None:
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise DependencyUnavailable(
            f"Redis is not reachable at REDIS_URL ({type(exc).__name__}); start Redis or set "
            "REDIS_URL"
        ) from exc


async def redis_readiness(client: RedisClient) -> str | None:
    """Readiness check: None when Redis answers PING."""
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        return f"redis unavailable: {type(exc).__name__}"
    return None


def describe_failure(exc: BaseException, *, broker: BrokerConfig, redis: RedisConfig) -> str | None:
    """One line naming what to fix when ``exc`` (or what caused it) is a failure to reach
    RabbitMQ or Redis; None for anything else."""
    for cause in _chain(exc):
        line = describe_amqp_failure(cause, broker) or describe_redis_failure(cause, redis)
        if line is not None:
            return line
    return None


def describe_amqp_failure(exc: BaseException, broker: BrokerConfig) -> str | None:
    where = hosts_of(broker.url.get_secret_value())
    if isinstance(exc, ProbableAuthenticationError | AuthenticationError):
        return (
            f"RabbitMQ at {where} refused the user or password in AMQP_URL (ACCESS_REFUSED); "
            "fix AMQP_URL"
        )
    if isinstance(exc, InvalidFrameError) and "Connection.Close" in str(exc):
        return (
            f"RabbitMQ at {where} closed the connection while opening it: the virtual host in "
            "AMQP_URL does not exist or its user may not use it; fix AMQP_URL"
        )
    if isinstance(exc, IncompatibleProtocolError | AmqpNoAnswer):
        return (
            f"nothing at {where} answered as RabbitMQ ({exc}); is AMQP_URL the broker's "
            "AMQP port (5672, 5671 for amqps)?"
        )
    if isinstance(exc, AMQPConnectionError):
        return f"RabbitMQ is not reachable at {where} (AMQP_URL); start RabbitMQ or fix AMQP_URL"
    return None


def describe_redis_failure(exc: BaseException, redis: RedisConfig) -> str | None:
    where = _host_port(redis.url.get_secret_value(), default_port=6379)
    auth = (RedisAuthenticationError, AuthenticationWrongNumberOfArgsError)
    if isinstance(exc, auth) or (isinstance(exc, ResponseError) and "NOAUTH" in str(exc)):
        return f"Redis at {where} refused the password in REDIS_URL; fix REDIS_URL"
    if isinstance(exc, RedisError):
        return f"Redis is not reachable at {where} (REDIS_URL); start Redis or fix REDIS_URL"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _host_port(url: str, *, default_port: int) -> str:
    """``host:port`` of a URL, never its credentials."""
    try:
        parts = urlsplit(url)
        port = parts.port or default_port
    except ValueError:
        return "?"
    return f"{parts.hostname or '?'}:{port}"


def freeze_startup_heap() -> None:
    """Leave what start-up built (modules, the local embedding model, the graph, the
    clients) out of every later full garbage collection (``gc.freeze``). A full collection
    walks every tracked object and stops the event loop meanwhile: without this, loading a
    user's big retrieval index triggered 120-270 ms stalls; with it, 13-26 ms
    (docs/benchmarks-notebook.md, "Retrieval under a resync")."""
    gc.collect()
    gc.freeze()
