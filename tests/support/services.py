"""Finding the real RabbitMQ and Redis for tests: configured URLs, else testcontainers.

Never a skip: when neither the configured services nor Docker are available, the tests
that need them fail with a message that says what to start.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_AMQP_URL = "amqp://guest:guest@localhost:5672/"
DEFAULT_REDIS_URL = "redis://localhost:6379/0"


@dataclass(frozen=True)
class ServiceUrls:
    amqp_url: str
    redis_url: str


def reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "localhost", parts.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    result = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=20)  # noqa: S607  # docker from PATH, like a developer would run it
    return result.returncode == 0


@contextmanager
def real_services(amqp_url: str, redis_url: str) -> Iterator[ServiceUrls]:
    """The configured services when reachable, else containers, else a loud failure."""
    if reachable(amqp_url, 5672) and reachable(redis_url, 6379):
        yield ServiceUrls(amqp_url, redis_url)
        return
    if not docker_available():
        raise RuntimeError(
            f"RabbitMQ ({urlsplit(amqp_url).hostname}:{urlsplit(amqp_url).port or 5672}) or "
            f"Redis ({urlsplit(redis_url).hostname}:{urlsplit(redis_url).port or 6379}) is not "
            "reachable and Docker is not available for testcontainers. Start RabbitMQ and "
            "Redis (see docs/testing.md) or set AMQP_URL / REDIS_URL."
        )
    from testcontainers.rabbitmq import RabbitMqContainer  # noqa: PLC0415  # only with Docker
    from testcontainers.redis import RedisContainer  # noqa: PLC0415  # only with Docker

    with (
        RabbitMqContainer("rabbitmq:3.13-management") as rabbit,
        RedisContainer("redis:7") as redis,
    ):
        amqp = (
            f"amqp://guest:guest@{rabbit.get_container_host_ip()}:{rabbit.get_exposed_port(5672)}/"
        )
        redis_url_c = f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(6379)}/0"
        yield ServiceUrls(amqp, redis_url_c)
