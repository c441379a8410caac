"""Redis failures are retryable ``MemoryUnavailable`` everywhere, translated in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

import llm_bot.adapters
from llm_bot.adapters.redis_errors import redis_failures_retryable
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_progress import RedisMemoryProgress
from llm_bot.errors import ErasedMeanwhile, MemoryUnavailable, RetryableError
from llm_bot.memory.conversation_key import ConversationKey


@redis_failures_retryable
class _Adapter:
    async def fails(self, error: Exception) -> None:
        raise error

    async def _private(self) -> None:
        raise OSError("reset")

    @asynccontextmanager
    async def holding(self, *, fail_on_enter: bool) -> AsyncIterator[str]:
        if fail_on_enter:
            raise RedisConnectionError("refused")
        yield "held"

    def plain(self) -> int:
        return 1


async def test_redis_and_socket_errors_become_memory_unavailable() -> None:
    adapter = _Adapter()
    with pytest.raises(MemoryUnavailable, match=r"_Adapter\.fails: ConnectionError") as info:
        await adapter.fails(RedisConnectionError("refused"))
    assert isinstance(info.value, RetryableError)
    with pytest.raises(MemoryUnavailable, match="_private: OSError"):
        await adapter._private()


async def test_the_service_own_errors_pass_through() -> None:
    with pytest.raises(ErasedMeanwhile):
        await _Adapter().fails(ErasedMeanwhile("erased"))
    with pytest.raises(ValueError, match="bug"):
        await _Adapter().fails(ValueError("bug"))


async def test_async_context_managers_are_translated_on_enter_and_inside() -> None:
    adapter = _Adapter()
    with pytest.raises(MemoryUnavailable, match="holding"):
        async with adapter.holding(fail_on_enter=True):
            pass
    async with adapter.holding(fail_on_enter=False) as value:
        assert value == "held"
    with pytest.raises(MemoryUnavailable):
        async with adapter.holding(fail_on_enter=False):
            raise RedisConnectionError("lost")
    assert adapter.plain() == 1


def _redis_adapter_classes() -> Iterator[type]:
    for module_info in pkgutil.iter_modules(llm_bot.adapters.__path__):
        module = importlib.import_module(f"llm_bot.adapters.{module_info.name}")
        source = inspect.getsource(module)
        if "redis" not in source or module_info.name == "redis_errors":
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(
                inspect.iscoroutinefunction(m) for m in vars(cls).values()
            ):
                yield cls


def test_every_redis_adapter_class_translates_its_failures() -> None:
    """A new adapter talking to Redis cannot forget the decorator."""
    classes = list(_redis_adapter_classes())
    assert RedisMemoryProgress in classes
    for cls in classes:
        for name, member in vars(cls).items():
            if inspect.iscoroutinefunction(member):
                assert hasattr(member, "__wrapped__"), f"{cls.__name__}.{name} not translated"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_worker_progress_calls_that_used_to_escape_are_retryable(closed_port: int) -> None:
    """``job_done`` raising ConnectionError dead-lettered memory jobs as ``internal``."""
    client = aioredis.Redis(port=closed_port, retry=Retry(NoBackoff(), 0))
    progress = RedisMemoryProgress(client=client, keys=RedisKeys("t"), job_ttl_seconds=60)
    key = ConversationKey("t", "u", "c")
    try:
        for call in (
            progress.job_done("t", "u", "job_1"),
            progress.touch(key, 1.0),
            progress.idle(2.0),
            progress.clear_activity(key, 1.0),
        ):
            with pytest.raises(MemoryUnavailable):
                await call
    finally:
        await client.aclose()


async def test_an_attribute_error_inside_redis_py_is_a_redis_failure_but_ours_is_not() -> None:
    """redis-py's async cluster client can raise AttributeError on a connection a dead
    node's reset left half-closed: retryable. The same error from our own code is a bug."""
    from redis.asyncio.connection import Connection  # noqa: PLC0415

    @redis_failures_retryable
    class Adapter:
        async def half_closed(self) -> None:
            connection = Connection()
            await connection._send_packed_command([b"PING"])  # no writer: AttributeError

        async def ours(self) -> None:
            raise AttributeError("a bug of ours")

    with pytest.raises(MemoryUnavailable):
        await Adapter().half_closed()
    with pytest.raises(AttributeError):
        await Adapter().ours()
