"""The collector is tuned while a consumer of the process runs (start-up heap frozen,
generation 0 collected less often), and given back as it was when the last one stops."""

from __future__ import annotations

import gc

from llm_bot.delivery.gc_tuning import YOUNG_THRESHOLD, ConsumingGc


def test_tuned_while_any_holder_runs_and_restored_after_the_last() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    tuning = ConsumingGc()
    tuning.hold()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == max(YOUNG_THRESHOLD, before[0])
    assert gc.get_threshold()[1:] == before[1:]
    tuning.hold()  # a second consumer of the process (service and worker in one)
    tuning.release()
    assert gc.get_freeze_count() > 0
    tuning.release()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
