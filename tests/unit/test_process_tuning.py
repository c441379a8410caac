"""The process is tuned while a consumer of it runs (start-up heap frozen, generation 0
collected less often, matrix products on one thread), and given back as it was when the
last one stops."""

from __future__ import annotations

import gc

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from llm_bot.delivery.process_tuning import BLAS_THREAD_SETTINGS, YOUNG_THRESHOLD, ConsumingTuning


def test_tuned_while_any_holder_runs_and_restored_after_the_last() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    tuning = ConsumingTuning()
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


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_matrix_products_run_on_one_thread_while_held(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREAD_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    with threadpool_limits(limits=2, user_api="blas"):  # as on a 2-core machine
        assert blas_threads() == {2}
        tuning = ConsumingTuning()
        tuning.hold()
        tuning.hold()
        assert blas_threads() == {1}
        tuning.release()
        assert blas_threads() == {1}  # a holder is left
        tuning.release()
        assert blas_threads() == {2}


def test_an_operators_thread_setting_is_left_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    with threadpool_limits(limits=2, user_api="blas"):
        tuning = ConsumingTuning()
        tuning.hold()
        assert blas_threads() == {2}
        tuning.release()
        assert blas_threads() == {2}
