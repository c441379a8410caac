"""The CLI's coroutine runner: uvloop where installed, the standard loop otherwise."""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import pytest

from llm_bot.entrypoints import event_loop


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_uvloop_where_it_is_a_dependency() -> None:
    """pyproject.toml installs uvloop everywhere but Windows; CI runs on Linux."""
    assert event_loop.loop_name() == "uvloop"
    assert event_loop.run(_loop_type()).startswith("uvloop")


def test_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert event_loop.loop_name() == "asyncio"
    assert event_loop.run(_loop_type()).startswith("asyncio")
