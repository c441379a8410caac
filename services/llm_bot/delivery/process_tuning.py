"""A process tuned while a consumer consumes: the garbage collector (its start-up heap
frozen, the youngest generation collected less often) and matrix products on one thread.

Matrix products (BLAS) run on the calling thread alone. The reply path's search multiplies
the query with every embedding of a user on the event loop while the embedder's threads and
other events want the same cores; OpenBLAS's own threads (one per core by default) then
wait for cores and spin. Measured on this 2-core machine with other processes busy (the
bench's reply-path retrieval, ``Retriever.prepare`` + ``retrieve``, over its 10,000-entry
synthetic index, one process per run, ``OPENBLAS_NUM_THREADS`` 1 and 2 in turn, six pairs):
p50 / p95 18.7-32.1 / 26.2-50.6 ms on one thread, 23.5-45.4 / 44.5-66.6 ms on two
(docs/benchmarks-notebook.md, "Retrieval latency"). A second thread helps a product only while a
core is idle (on an idle machine the search then takes ~2 ms less: 8.2-8.7 against
10.1-10.6 ms p50), and a busy service's cores rarely are. An operator who sets
``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` keeps that choice: the limit applies only
when neither is set. The embedders already ran their own products on one thread
(``adapters/multilingual_model.py``).

The collector:

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
