"""Outcome → broker actions: what is published, in which order, for every outcome."""

from __future__ import annotations

from datetime import UTC, datetime

from llm_bot.contract import MemoryJobV1
from llm_bot.service.broker_actions import (
    CopyToDeadLetters,
    PublishCandidate,
    PublishError,
    PublishJob,
    broker_actions,
)
from llm_bot.service.outcomes import (
    DeadLetter,
    Duplicate,
    EventIds,
    Recorded,
    Refused,
    Replied,
    Skipped,
)
from tests.unit.test_contract import make_candidate

IDS = EventIds("evt_1", "t", "u", "c")
JOB = MemoryJobV1(
    id="job_evt_1",
    kind="turn",
    tenant_id="t",
    user_id="u",
    conversation_id="c",
    turn=1,
    event_id="evt_1",
    created_at=datetime(2026, 11, 23, tzinfo=UTC),
)


def test_a_reply_publishes_its_candidate_then_its_memory_job() -> None:
    candidate = make_candidate()
    assert broker_actions(Replied(candidate, job=JOB)) == [
        PublishCandidate(candidate),
        PublishJob(JOB),
    ]
    assert broker_actions(Replied(candidate)) == [PublishCandidate(candidate)]


def test_a_duplicate_republishes_the_stored_candidate_if_there_is_one() -> None:
    candidate = make_candidate()
    assert broker_actions(Duplicate(candidate)) == [PublishCandidate(candidate)]
    assert broker_actions(Duplicate(None, job=JOB)) == [PublishJob(JOB)]


def test_recorded_and_skipped_publish_nothing_but_a_job() -> None:
    assert broker_actions(Recorded("erased 3 keys")) == []
    assert broker_actions(Recorded("finalization queued", job=JOB)) == [PublishJob(JOB)]
    assert broker_actions(Skipped("no prompt text")) == []


def test_a_dead_letter_publishes_the_error_event_before_the_copy() -> None:
    actions = broker_actions(DeadLetter("model_error", "503", attempts=3, ids=IDS))
    assert [type(a) for a in actions] == [PublishError, CopyToDeadLetters]
    error = actions[0]
    assert isinstance(error, PublishError)
    assert (error.error.event_id, error.error.code, error.error.attempts) == (
        "evt_1",
        "model_error",
        3,
    )
    assert actions[1] == CopyToDeadLetters("model_error", "503", 3)


def test_a_dead_letter_without_readable_ids_is_only_copied() -> None:
    outcome = DeadLetter("invalid_event", "invalid JSON", attempts=1, ids=None)
    assert broker_actions(outcome) == [CopyToDeadLetters("invalid_event", "invalid JSON", 1)]


def test_a_refusal_publishes_its_error_event_and_is_never_dead_lettered() -> None:
    """A spent token budget: ErrorV1 budget_exceeded, no copy to the DLQ (a replay later
    would spend a new period's budget on an old request)."""
    actions = broker_actions(Refused("tenant t spent its token budget", attempts=1, ids=IDS))
    assert [type(a) for a in actions] == [PublishError]
    error = actions[0]
    assert isinstance(error, PublishError)
    assert (error.error.event_id, error.error.code) == ("evt_1", "budget_exceeded")
    assert broker_actions(Refused("spent", attempts=1, ids=None)) == []
