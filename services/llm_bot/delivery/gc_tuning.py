"""The garbage collector tuned while a consumer consumes: its start-up heap frozen, and
the youngest generation collected less often.

Most of what an event allocates is freed by reference counting as soon as the event is
done; the cyclic collector's work is on top of that. Measured in the throughput bench's
(b) (2,000 events, 32 in flight), with Python's defaults:

- full (generation 2) collections walked the whole start-up heap (the imported libraries,
  pydantic schemas, the compiled graph: ~215,000 objects that live as long as the process)
  about every 4 s, ~0.12 s each: ~0.36 ms per event. ``gc.freeze()`` once consuming starts
  moves what exists then to the permanent generation, which collections skip (~7 ms each).
  ``llm-bot run`` and ``llm-bot worker`` froze it already (``startup.freeze_startup_heap``,
  after starting the consumer); a service run in-process (the throughput bench's (b),
  ``llm-bot demo``, tests) did not;
- a generation-0 collection ran every 700 net allocations, ~750 of them (0.4-0.5 s, and
  0.1 s of generation-1 collections they lead to): the 32 events in flight keep the count
  high, and what they hold was promoted before it was freed. At a threshold of 10,000 the
  same run collects generation 0 about 5 times.

``release`` when the process's last consumer stops unfreezes the heap and restores the
thresholds (tests run many services in one process). ``llm-bot inspect`` holds it while it
serves: its pages allocate as events do, over a heap of big users' indexes and facts. The cost: cyclic garbage (an
exception with its traceback, for one) waits for up to 10,000 net allocations instead of
700 before it is collected, and what was garbage among the frozen objects until release.
"""

from __future__ import annotations

import gc
import threading

YOUNG_THRESHOLD = 10_000
"""Generation 0's collection threshold while consuming (Python's default: 700)."""


class ConsumingGc:
    """The collector tuned while at least one holder consumes (a process's consumers share
    it: ``llm-bot demo`` and tests run a service and a worker in one process)."""

    def __init__(self) -> None:
        self._holders = 0
        self._lock = threading.Lock()
        self._thresholds: tuple[int, int, int] | None = None

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._thresholds = gc.get_threshold()
                gc.freeze()
                _, older, oldest = self._thresholds
                gc.set_threshold(max(YOUNG_THRESHOLD, self._thresholds[0]), older, oldest)
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                gc.unfreeze()
                if self._thresholds is not None:
                    gc.set_threshold(*self._thresholds)
                    self._thresholds = None


CONSUMING_GC = ConsumingGc()
SERVING_GC = CONSUMING_GC
"""The same holder count: ``llm-bot inspect`` serving beside a consumer in one process
(tests) must not release what the consumer holds."""
