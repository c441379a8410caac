"""What the broker must be told for each outcome: a pure mapping, no I/O.

The consumer executes the actions in order and acks last. Publishing the candidate (or the
ErrorV1 and the dead-letter copy) comes first; the memory job is a hint whose loss is
logged, never allowed to fail an event whose reply went out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from llm_bot.contract import CandidateV1, ErrorV1, FlowResultV1, MemoryJobV1
from llm_bot.service.outcomes import (
    DeadLetter,
    Duplicate,
    LetGo,
    Outcome,
    Recorded,
    Refused,
    Replied,
    Skipped,
    flow_result_of,
    job_of,
)


@dataclass(frozen=True)
class PublishCandidate:
    candidate: CandidateV1


@dataclass(frozen=True)
class PublishFlowResult:
    """A flow's result (the flow ended with this event), after its candidate."""

    result: FlowResultV1


@dataclass(frozen=True)
class PublishError:
    error: ErrorV1


@dataclass(frozen=True)
class CopyToDeadLetters:
    """The original message, unchanged, to the DLX with ``x-error-*`` headers."""

    code: str
    reason: str
    attempts: int


@dataclass(frozen=True)
class PublishJob:
    """Best effort: a job that cannot be published is logged (the sweep recovers it)."""

    job: MemoryJobV1


BrokerAction = PublishCandidate | PublishFlowResult | PublishError | CopyToDeadLetters | PublishJob


def broker_actions(outcome: Outcome) -> list[BrokerAction]:
    """The publishes an outcome needs, in order; the delivery is acked after them."""
    actions: list[BrokerAction] = []
    if isinstance(outcome, Replied):
        actions.append(PublishCandidate(outcome.candidate))
    elif isinstance(outcome, Duplicate):
        if outcome.candidate is not None:  # republished verbatim: same id, same text
            actions.append(PublishCandidate(outcome.candidate))
    elif isinstance(outcome, DeadLetter):
        error = outcome.error_event()
        if error is not None:
            actions.append(PublishError(error))
        actions.append(CopyToDeadLetters(outcome.code, outcome.message, outcome.attempts))
    elif isinstance(outcome, Refused):
        refusal = outcome.error_event()
        if refusal is not None:  # never dead-lettered: see Refused
            actions.append(PublishError(refusal))
    elif isinstance(outcome, Recorded | Skipped | LetGo):
        pass
    else:
        assert_never(outcome)
    flow_result = flow_result_of(outcome)
    if flow_result is not None:  # republished verbatim on a redelivery, like the candidate
        actions.append(PublishFlowResult(flow_result))
    job = job_of(outcome)
    if job is not None:
        actions.append(PublishJob(job))
    return actions
