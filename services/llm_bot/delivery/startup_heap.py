"""The start-up heap kept out of the garbage collector's full collections while consuming.

A consumer's process holds a large heap from start-up (the imported libraries, pydantic
schemas, the compiled graph) that lives as long as the process. Every full (generation 2)
collection walked all of it again: in the throughput bench about every 4 s, 0.1 s each,
~4% of the consumer's CPU. ``gc.freeze()`` once consuming starts moves what exists then to
the collector's permanent generation, which collections skip; ``gc.unfreeze()`` when the
last consumer of the process stops gives it back (tests run many services in one process).
What was garbage among the frozen objects is only reclaimed then: start-up's leftovers.
"""

from __future__ import annotations

import gc
import threading


class StartupHeap:
    """Frozen while at least one holder runs (consumers of one process share it)."""

    def __init__(self) -> None:
        self._holders = 0
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                gc.freeze()
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                gc.unfreeze()


STARTUP_HEAP = StartupHeap()
