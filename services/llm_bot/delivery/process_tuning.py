"""A process tuned while a consumer consumes: the garbage collector (its start-up heap
frozen, the youngest generation collected less often) and matrix products on one thread.

- **Matrix products on one thread.** The reply path's search multiplies the query with a
  user's embeddings on the event loop while the embedder's threads and other events want
  the same cores; OpenBLAS's own threads then wait for cores and spin (slower at p50 and
  p95 on a busy machine, docs/benchmarks-notebook.md "Retrieval latency"). An operator who
  sets ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` keeps that choice.
- **The collector.** Most of what an event allocates is freed by reference counting; the
  cyclic collector's full passes walked the whole start-up heap (~215,000 long-lived
  objects) and generation 0 ran every 700 net allocations with 32 events in flight.
  ``gc.freeze()`` once consuming starts, and generation 0 at 10,000, took the collector
  from ~0.6 to ~0.06 ms per event (docs/benchmarks-notebook.md, "the collector tuned
  while consuming"). The cost: cyclic garbage waits longer before it is collected.

``release`` when the process's last consumer stops unfreezes the heap and restores the
thresholds (tests run many services in one process). ``llm-bot inspect`` holds it while it
serves: its pages allocate as events do.
"""

from __future__ import annotations

import gc
import os
import threading

from threadpoolctl import threadpool_limits

BLAS_THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
"""Environment variables by which an operator sets BLAS's threads (then left as set)."""
YOUNG_THRESHOLD = 10_000
"""Generation 0's collection threshold while consuming (Python's default: 700)."""


class ConsumingTuning:
    """The process tuned while at least one holder consumes (a process's consumers share
    it: ``llm-bot demo`` and tests run a service and a worker in one process)."""

    def __init__(self) -> None:
        self._holders = 0
        self._lock = threading.Lock()
        self._thresholds: tuple[int, int, int] | None = None
        self._blas: threadpool_limits | None = None

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._thresholds = gc.get_threshold()
                gc.freeze()
                _, older, oldest = self._thresholds
                gc.set_threshold(max(YOUNG_THRESHOLD, self._thresholds[0]), older, oldest)
                if not any(os.environ.get(name) for name in BLAS_THREAD_SETTINGS):
                    self._blas = threadpool_limits(limits=1, user_api="blas")
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                gc.unfreeze()
                if self._thresholds is not None:
                    gc.set_threshold(*self._thresholds)
                    self._thresholds = None
                if self._blas is not None:
                    self._blas.restore_original_limits()
                    self._blas = None


CONSUMING_TUNING = ConsumingTuning()
SERVING_TUNING = CONSUMING_TUNING
"""The same holder count: ``llm-bot inspect`` serving beside a consumer in one process
(tests) must not release what the consumer holds."""
