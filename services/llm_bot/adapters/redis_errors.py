"""Redis failures become the service's error family in one place.

A Redis adapter class is decorated with ``@redis_failures_retryable``: every coroutine
method and async context manager it defines turns ``RedisError`` and ``OSError`` (a
connection refused or reset, a timeout) into ``MemoryUnavailable``, which the event
handler and the memory worker retry with backoff. A method added later is covered
without a hand-written ``except``; errors of the service's own families (``ErasedMeanwhile``,
``MemoryConflict``...) pass through unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

from redis.exceptions import RedisError

from llm_bot.errors import MemoryUnavailable

T = TypeVar("T")

REDIS_FAILURES = (RedisError, OSError)


def raised_in_redis_py(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside redis-py itself: its async cluster client can fail
    with an ``AttributeError`` on a connection a dead node's reset left without a writer
    (seen on a master killed -9). A failure of Redis, not of our code: retryable."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "/redis/" in tb.tb_frame.f_code.co_filename


@contextlib.contextmanager
def redis_failures_as_unavailable(where: str) -> Iterator[None]:
    """``RedisError``/``OSError`` inside become ``MemoryUnavailable`` naming ``where``."""
    try:
        yield
    except REDIS_FAILURES as exc:
        raise _unavailable(where, exc) from exc


def _unavailable(where: str, exc: BaseException) -> MemoryUnavailable:
    return MemoryUnavailable(f"redis failed in {where}: {type(exc).__name__}")


def redis_failures_retryable(cls: type[T]) -> type[T]:
    """Class decorator: translate Redis failures in every async method of ``cls``."""
    for name, member in list(vars(cls).items()):
        if name.startswith("__") or not callable(member):
            continue
        where = f"{cls.__name__}.{name}"
        if inspect.iscoroutinefunction(member):
            setattr(cls, name, _coroutine(member, where))
        elif inspect.isasyncgenfunction(getattr(member, "__wrapped__", None)):
            setattr(cls, name, _context_manager(member, where))
    return cls


def _coroutine(method: Callable[..., Any], where: str) -> Callable[..., Any]:
    @functools.wraps(method)
    async def translated(*args: Any, **kwargs: Any) -> Any:
        # What ``redis_failures_as_unavailable`` does, written out: this wraps every Redis
        # call of the reply path, and a generator context manager per call costs more.
        try:
            return await method(*args, **kwargs)
        except REDIS_FAILURES as exc:
            raise _unavailable(where, exc) from exc
        except AttributeError as exc:
            if not raised_in_redis_py(exc):
                raise
            raise _unavailable(where, exc) from exc

    return translated


def _context_manager(method: Callable[..., Any], where: str) -> Callable[..., Any]:
    """For ``@asynccontextmanager`` methods: failures entering or leaving are translated."""

    @functools.wraps(method)
    def translated(*args: Any, **kwargs: Any) -> _Translated:
        return _Translated(method, args, kwargs, where)

    return translated


class _Translated:
    """What ``redis_failures_as_unavailable`` around ``async with method(...)`` did, as a
    class (a lease's ``renewed`` is entered once per event): Redis failures entering,
    leaving or raised inside the block (and not suppressed) become ``MemoryUnavailable``."""

    __slots__ = ("_args", "_inner", "_kwargs", "_method", "_where")

    def __init__(
        self, method: Callable[..., Any], args: Any, kwargs: dict[str, Any], where: str
    ) -> None:
        self._method = method
        self._args = args
        self._kwargs = kwargs
        self._where = where
        self._inner: AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        try:
            self._inner = self._method(*self._args, **self._kwargs)
            return await self._inner.__aenter__()
        except REDIS_FAILURES as exc:
            raise _unavailable(self._where, exc) from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._inner is not None  # noqa: S101  # entered
        try:
            suppressed = await self._inner.__aexit__(exc_type, exc, traceback)
        except REDIS_FAILURES as failure:
            raise _unavailable(self._where, failure) from failure
        if not suppressed and isinstance(exc, REDIS_FAILURES):
            raise _unavailable(self._where, exc) from exc
        return suppressed
