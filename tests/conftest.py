"""Shared fixtures: the real services, the fake model, settings unique to each test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from tests.support.harness import TEST_KEY_PREFIX, remove_test_queues, settings_for_test
from tests.support.rabbit_cluster import RabbitClusterNodes
from tests.support.rabbit_cluster import rabbit_cluster as rabbit_cluster_nodes
from tests.support.redis_cluster import RedisClusterNodes
from tests.support.redis_cluster import redis_cluster as redis_cluster_nodes
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls, real_services
from tests.support.workers import ClusterGroupScheduling, misplaced


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: make test's -n 4 --dist loadgroup
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ClusterGroupScheduling | None:
    """The tests of one session-scoped cluster in one worker (tests/support/workers.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return ClusterGroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test may request a session cluster only from a module listed for that cluster's
    group (tests/support/workers.py), or it would build a cluster of its own worker's."""
    for item in items:
        wrong = misplaced(item.nodeid, getattr(item, "fixturenames", ()))
        if wrong:
            raise pytest.UsageError(
                f"{item.nodeid} uses {', '.join(wrong)}: list its module in "
                "CLUSTER_MODULES (tests/support/workers.py)"
            )


@pytest.fixture(scope="session")
def service_urls() -> Iterator[ServiceUrls]:
    """Real RabbitMQ and Redis (configured, else testcontainers); fails loudly, never skips.
    Requested only by tests that use services, so the unit suite runs without them. At the
    end, every Redis key the session wrote (under its own prefix) is removed, and every
    queue its tests' settings named on this broker is deleted."""
    try:
        with real_services(
            os.environ.get("AMQP_URL", DEFAULT_AMQP_URL),
            os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
        ) as urls:
            yield urls
            _remove_test_keys(urls.redis_url)
            remove_test_queues(urls.amqp_url)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def _remove_test_keys(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        names = list(client.scan_iter(match=f"{TEST_KEY_PREFIX}*", count=1000))
        for start in range(0, len(names), 500):
            client.unlink(*names[start : start + 500])
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterNodes]:
    """A 3-master, 3-replica Redis Cluster of this session's own (built on first use)."""
    try:
        with redis_cluster_nodes() as nodes:
            yield nodes
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def rabbit_cluster() -> Iterator[RabbitClusterNodes]:
    """A 3-node RabbitMQ cluster of this session's own (built on first use)."""
    try:
        with rabbit_cluster_nodes() as nodes:
            yield nodes
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
async def fake_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer() as server:
        yield server


@pytest.fixture
def make_settings(
    service_urls: ServiceUrls, fake_model: FakeModelServer
) -> Callable[..., Settings]:
    def factory(**overrides: Any) -> Settings:
        return settings_for_test(service_urls, fake_model.base_url, **overrides)

    return factory
