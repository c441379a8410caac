"""The memory worker's job orchestration, on in-memory ports: no Redis, no broker, no model.

Every conversation here has nothing left to classify or compact, so the model is never
asked (``_NoModel`` fails the test if it is): what is tested is the orchestration around
it, idempotency, erasure and the retry of storage failures.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.contract import MemoryJobV1
from llm_bot.errors import MemoryUnavailable
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.working import ConversationProgress
from llm_bot.ports import ModelReply
from llm_bot.service.classifier import MessageClassifier
from llm_bot.service.compactor import Compactor
from llm_bot.service.handler import Delivery
from llm_bot.service.memory_jobs import MemoryJobHandler
from llm_bot.service.outcomes import DeadLetter, Duplicate, Recorded, Skipped
from llm_bot.service.retry import RetryPolicy
from llm_bot.telemetry.metrics import Metrics
from tests.support.in_memory import (
    InMemoryLease,
    InMemoryLongTermStore,
    InMemoryProgress,
)

KEY = ConversationKey("t", "u", "c")
NOW = datetime(2026, 11, 23, tzinfo=UTC)


class _NoModel:
    async def complete_json(self, messages: Any, **_: Any) -> ModelReply:
        raise AssertionError("the model was asked although nothing was due")


def _handler(progress: InMemoryProgress, *, attempts: int = 3) -> MemoryJobHandler:
    ltm = InMemoryLongTermStore(progress)
    metrics = Metrics(registry=CollectorRegistry())
    common: dict[str, Any] = {
        "progress": progress,
        "ltm": ltm,
        "model": _NoModel(),
        "metrics": metrics,
        "clock": lambda: NOW,
    }
    return MemoryJobHandler(
        progress=progress,
        classifier=MessageClassifier(threshold=0.5, **common),
        compactor=Compactor(lease=InMemoryLease(), **common),
        indexer=None,
        retry=RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.0),
        compaction_threshold_tokens=10_000,
        metrics=metrics,
        clock=lambda: NOW,
    )


def _delivery(job_id: str = "job_evt_1", kind: str = "turn") -> Delivery:
    job = MemoryJobV1(
        id=job_id,
        kind=kind,
        tenant_id=KEY.tenant_id,
        user_id=KEY.user_id,
        conversation_id=KEY.conversation_id,
        turn=1,
        event_id="evt_1",
        created_at=NOW,
    )
    return Delivery(body=job.model_dump_json(by_alias=True).encode())


def _progress_with_conversation() -> InMemoryProgress:
    progress = InMemoryProgress()
    progress.add_conversation(KEY, ConversationProgress(None, 1, 0, 1))
    return progress


async def test_a_turn_job_is_done_once_and_marked() -> None:
    progress = _progress_with_conversation()
    handler = _handler(progress)
    first = await handler.handle(_delivery())
    again = await handler.handle(_delivery())
    assert isinstance(first, Recorded)
    assert isinstance(again, Duplicate)
    assert progress.done_jobs == {("t", "u", "job_evt_1")}
    assert progress.activity[KEY] == NOW.timestamp()


async def test_a_conversation_without_memory_is_skipped_and_leaves_the_sweep() -> None:
    progress = InMemoryProgress()
    progress.activity[KEY] = 1.0
    outcome = await _handler(progress).handle(_delivery())
    assert isinstance(outcome, Skipped)
    assert KEY not in progress.activity
    assert not progress.done_jobs


@pytest.mark.parametrize("method", ["job_done", "erasure", "exists", "touch", "mark_job_done"])
async def test_a_storage_failure_anywhere_is_retried_not_dead_lettered(method: str) -> None:
    progress = _progress_with_conversation()
    progress.fail(method, MemoryUnavailable("redis failed: ConnectionError"))
    outcome = await _handler(progress).handle(_delivery())
    assert isinstance(outcome, Recorded), outcome
    assert progress.done_jobs == {("t", "u", "job_evt_1")}


async def test_storage_down_for_every_attempt_ends_as_memory_unavailable() -> None:
    progress = _progress_with_conversation()
    progress.fail("job_done", *[MemoryUnavailable("redis failed: ConnectionError")] * 3)
    outcome = await _handler(progress, attempts=3).handle(_delivery())
    assert isinstance(outcome, DeadLetter)
    assert (outcome.code, outcome.attempts) == ("memory_unavailable", 3)


async def test_an_erasure_during_the_job_refuses_its_writes_and_the_retry_finds_it_gone() -> None:
    progress = _progress_with_conversation()

    async def erase_on_touch(key: ConversationKey, at: float) -> None:
        progress.erase(key.tenant_id, key.user_id)
        del progress.progress[key]  # what the erasure deleted

    progress.touch = erase_on_touch  # type: ignore[method-assign]
    outcome = await _handler(progress).handle(_delivery())
    assert isinstance(outcome, Skipped)  # retried: the conversation is gone
    assert not progress.done_jobs


async def test_an_invalid_job_is_dead_lettered_at_once() -> None:
    outcome = await _handler(InMemoryProgress()).handle(Delivery(body=b'{"id": 1}'))
    assert isinstance(outcome, DeadLetter)
    assert (outcome.code, outcome.attempts) == ("invalid_event", 1)
