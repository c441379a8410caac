"""The start-up heap is frozen while a consumer of the process runs, and given back to the
garbage collector when the last one stops."""

from __future__ import annotations

import gc

from llm_bot.delivery.startup_heap import StartupHeap


def test_frozen_while_any_holder_runs_and_thawed_after_the_last() -> None:
    gc.unfreeze()
    heap = StartupHeap()
    heap.hold()
    assert gc.get_freeze_count() > 0
    heap.hold()  # a second consumer of the process (service and worker in one)
    heap.release()
    assert gc.get_freeze_count() > 0
    heap.release()
    assert gc.get_freeze_count() == 0
