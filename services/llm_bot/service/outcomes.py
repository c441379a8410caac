"""What happened to a delivery, as types; the consumer maps each to broker actions.

This module is the one place where an error becomes a delivery outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, assert_never

from llm_bot.contract import CandidateV1, ErrorCode, ErrorV1, FlowResultV1, MemoryJobV1
from llm_bot.errors import BudgetExceeded, LlmBotError, public_message

OutcomeName = Literal["ok", "skip", "duplicate", "retried", "dead_lettered", "refused", "let_go"]


@dataclass(frozen=True)
class EventIds:
    """The ids of an event, when they could be read and are valid."""

    event_id: str
    tenant_id: str
    user_id: str
    conversation_id: str


@dataclass(frozen=True)
class Replied:
    """A candidate was produced and memory committed: publish it, then ack."""

    candidate: CandidateV1
    job: MemoryJobV1 | None = None
    flow_result: FlowResultV1 | None = None
    """The result of the flow this message ended: published after the candidate."""
    name: OutcomeName = "ok"


@dataclass(frozen=True)
class Recorded:
    """The event changed memory (tool trace, erasure) or asked for finalization: ack."""

    detail: str
    job: MemoryJobV1 | None = None
    name: OutcomeName = "ok"


@dataclass(frozen=True)
class Skipped:
    """Nothing to do (no prompt text, nothing to finalize yet): ack."""

    reason: str
    name: OutcomeName = "skip"


@dataclass(frozen=True)
class Duplicate:
    """Already processed: republish the stored candidate if there is one, then ack."""

    candidate: CandidateV1 | None
    job: MemoryJobV1 | None = None
    flow_result: FlowResultV1 | None = None
    name: OutcomeName = "duplicate"


@dataclass(frozen=True)
class LetGo:
    """The event is no longer this taker's (its conversation's lease went to another
    taker while this one waited to retry, or the event is done or gone from the fair
    queue): nothing is published and nothing settled. Whoever has it now answers it, so
    one event never gets both a candidate and an ErrorV1."""

    reason: str
    attempts: int
    name: OutcomeName = "let_go"


def error_event(code: ErrorCode, message: str, attempts: int, ids: EventIds) -> ErrorV1:
    return ErrorV1(
        event_id=ids.event_id,
        tenant_id=ids.tenant_id,
        user_id=ids.user_id,
        conversation_id=ids.conversation_id,
        code=code,
        message=message[:1024],
        attempts=attempts,
        created_at=datetime.now(UTC),
    )


@dataclass(frozen=True)
class Refused:
    """The tenant is over its token budget: publish ErrorV1 ``budget_exceeded`` (when ids
    are known) and ack, without a dead letter: a replay later would only spend the budget
    of a new period on an old request."""

    message: str
    attempts: int
    ids: EventIds | None
    name: OutcomeName = "refused"

    def error_event(self) -> ErrorV1 | None:
        if self.ids is None:
            return None
        return error_event("budget_exceeded", self.message, self.attempts, self.ids)


@dataclass(frozen=True)
class DeadLetter:
    """Terminal failure: publish ErrorV1 (when ids are known), dead-letter, ack."""

    code: ErrorCode
    message: str
    attempts: int
    ids: EventIds | None
    name: OutcomeName = "dead_lettered"

    def error_event(self) -> ErrorV1 | None:
        if self.ids is None:
            return None
        return error_event(self.code, self.message, self.attempts, self.ids)


Outcome = Replied | Recorded | Skipped | Duplicate | DeadLetter | Refused | LetGo


def candidate_of(outcome: Outcome) -> CandidateV1 | None:
    """The candidate an outcome publishes: a reply's, or a duplicate's stored one."""
    match outcome:
        case Replied() | Duplicate():
            return outcome.candidate
        case Recorded() | Skipped() | DeadLetter() | Refused() | LetGo():
            return None
        case _:
            assert_never(outcome)


def flow_result_of(outcome: Outcome) -> FlowResultV1 | None:
    """The result of the flow the outcome's event ended, if it ended one."""
    match outcome:
        case Replied() | Duplicate():
            return outcome.flow_result
        case Recorded() | Skipped() | DeadLetter() | Refused() | LetGo():
            return None
        case _:
            assert_never(outcome)


def job_of(outcome: Outcome) -> MemoryJobV1 | None:
    """The memory job the outcome's event made, if it made one."""
    match outcome:
        case Replied() | Recorded() | Duplicate():
            return outcome.job
        case Skipped() | DeadLetter() | Refused() | LetGo():
            return None
        case _:
            assert_never(outcome)


def outcome_for_error(
    error: Exception, *, ids: EventIds | None, attempts: int
) -> DeadLetter | Refused:
    """Map a failure to its terminal outcome with a stable code and a safe message.

    A spent token budget is refused (ErrorV1, no dead letter). The message is the error's
    own fixed text (``public_message``): a provider's text stays in the error's
    ``detail`` (logs only, redacted), and an unexpected exception is named by its type.
    """
    message = public_message(error)
    if isinstance(error, BudgetExceeded):
        return Refused(message=message, attempts=attempts, ids=ids)
    code = error.code if isinstance(error, LlmBotError) else "internal"
    return DeadLetter(code=code, message=message, attempts=attempts, ids=ids)
