"""Working memory of one conversation and the records kept beside it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tool_rounds import ToolRound
from llm_bot.memory.topic_state import TopicState


class WorkingMemory(BaseModel):
    """The recent-message window, the rolling summary and session variables.

    ``pending_compaction`` lists the turns evicted from the window that compaction has
    not folded into the summary yet; their messages stay in the raw trace.
    """

    model_config = ConfigDict(frozen=True)

    messages: tuple[ChatMessage, ...] = ()
    summary: str = ""
    session: dict[str, str] = Field(default_factory=dict)
    pending_compaction: tuple[int, ...] = ()
    updated_at: str | None = None
    topic: TopicState | None = None
    """The retrieval topic: its centroid and last selection (``memory/topic.py``)."""
    tool_round: ToolRound | None = None
    """The model's calls awaiting their tool results (``memory/tool_rounds.py``)."""


class ProcessedEvent(BaseModel):
    """What an event produced, kept for idempotency: a redelivery republishes this."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    turn: int
    candidate_json: str | None = None
    flow_result_json: str | None = None
    """The FlowResultV1 of the flow this event ended, if it ended one."""


@dataclass(frozen=True)
class Recalled:
    """Everything ``recall`` loads for one event, in one round trip."""

    memory: WorkingMemory
    last_turn: int
    version: int
    processed: ProcessedEvent | None
    bundle: LongTermBundle = field(default_factory=LongTermBundle)
    erasure: str = ""
    """The user's erasure generation as read (see ``adapters/redis_erasure.py``)."""
    erased_before: float = 0.0
    """Events of the conversation made at or before this time (Unix seconds) were erased by
    a ``memory.forget`` that came after them: they are skipped, never recorded (0: none)."""


@dataclass(frozen=True)
class MemoryCommit:
    """Everything ``remember`` writes for one event, atomically.

    ``expected_version`` is the conversation's version as recalled: the commit fails with
    ``MemoryConflict`` if another event committed in between (no lost updates).
    """

    key: ConversationKey
    expected_version: int
    turn: int
    memory: WorkingMemory
    trace: tuple[ChatMessage, ...]
    processed: ProcessedEvent | None
    lease_token: str | None = None
    erasure: str = ""
    """The erasure generation ``recall`` read: the commit is refused if it changed."""


@dataclass(frozen=True)
class ConversationProgress:
    """What the memory worker has done for a conversation (its meta) and its working memory."""

    memory: WorkingMemory | None
    last_turn: int
    compacted_through: int
    classified_through: int
    indexed_through: int = 0
