"""What happened to a delivery, as types; the consumer maps each to broker actions.

This module is the one place where an error becomes a delivery outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from llm_bot.contract import CandidateV1, ErrorCode, ErrorV1, FlowResultV1, MemoryJobV1
from llm_bot.errors import LlmBotError

OutcomeName = Literal["ok", "skip", "duplicate", "retried", "dead_lettered"]


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
        return ErrorV1(
            event_id=self.ids.event_id,
            tenant_id=self.ids.tenant_id,
            user_id=self.ids.user_id,
            conversation_id=self.ids.conversation_id,
            code=self.code,
            message=self.message[:1024],
            attempts=self.attempts,
            created_at=datetime.now(UTC),
        )


Outcome = Replied | Recorded | Skipped | Duplicate | DeadLetter


def outcome_for_error(error: Exception, *, ids: EventIds | None, attempts: int) -> DeadLetter:
    """Map a failure to its terminal outcome with a stable code and a safe message.

    Unexpected exceptions become ``internal`` with only their type name: their text may
    hold content or secrets.
    """
    if isinstance(error, LlmBotError):
        return DeadLetter(code=error.code, message=str(error), attempts=attempts, ids=ids)
    return DeadLetter(
        code="internal",
        message=f"unexpected {type(error).__name__}",
        attempts=attempts,
        ids=ids,
    )
