"""How the CLI runs its coroutines: on uvloop where it is installed (Linux and macOS).

uvloop takes a third of the event loop's and the sockets' CPU away from every event
(docs/benchmarks.md); the service behaves the same on the standard loop, which is what
the tests run on and what a platform without uvloop gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: what :func:`run` will use here."""
    try:
        import uvloop  # noqa: F401, PLC0415
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` with uvloop's event loop when it is available."""
    if loop_name() == "uvloop":
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)
