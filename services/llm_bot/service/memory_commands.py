"""Each memory job becomes one typed command, decoded once at the edge: the worker's
handler dispatches on the command's class with ``match`` and ``assert_never``, never on the
wire's ``kind`` string (a new job kind is a type error until the handler handles it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, assert_never

from llm_bot.contract import MemoryJobV1
from llm_bot.memory.conversation_key import ConversationKey

JobKind = Literal["turn", "finalize"]


@dataclass(frozen=True, kw_only=True)
class MemoryCommand:
    """What every memory job carries."""

    kind: ClassVar[JobKind]
    """The contract's name for the job's kind (for logs and outcome reasons)."""

    job_id: str
    key: ConversationKey


@dataclass(frozen=True, kw_only=True)
class FormTurn(MemoryCommand):
    """``turn``: a turn was committed; classify its user messages, compact what left the
    window (or what token pressure pushes out), index what is new."""

    kind: ClassVar[JobKind] = "turn"
    turn: int
    prompt_tokens: int | None = None
    """The provider-reported prompt tokens of the turn's model call."""


@dataclass(frozen=True, kw_only=True)
class FinalizeConversation(MemoryCommand):
    """``finalize``: the conversation ended or went idle; compact everything left, index
    the long-term items, prune what expired."""

    kind: ClassVar[JobKind] = "finalize"


MemoryJobCommand = FormTurn | FinalizeConversation


def memory_command(job: MemoryJobV1) -> MemoryJobCommand:
    """The typed command of a (validated) memory job."""
    key = ConversationKey(job.tenant_id, job.user_id, job.conversation_id)
    match job.kind:
        case "turn":
            return FormTurn(job_id=job.id, key=key, turn=job.turn, prompt_tokens=job.prompt_tokens)
        case "finalize":
            return FinalizeConversation(job_id=job.id, key=key)
        case _:
            assert_never(job.kind)
