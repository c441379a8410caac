"""Pydantic models of InternalEventV2 (ingress), CandidateV1 and ErrorV1 (egress).

Field names, id pattern and ``schema`` values are a contract; the JSON Schemas in
``schemas/`` are generated from these models (``make schemas``) and checked for drift.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from llm_bot.contract.identifiers import ID_MAX_LENGTH, ID_PATTERN
from llm_bot.contract.tools import MAX_TOOLS, CandidateToolCall, ToolDefinition

Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
"""Ids (event, tenant, user, conversation): safe to embed in Redis keys."""

ConversationSelector = Annotated[str, StringConstraints(pattern=rf"{ID_PATTERN}|^\*$")]
MetadataValue = Annotated[str, StringConstraints(max_length=1024)] | int | float | bool | None
EventType = Literal[
    "message", "transcript", "conversation.end", "memory.forget", "tool.call", "tool.result"
]
ErrorCode = Literal[
    "invalid_event", "model_error", "memory_unavailable", "timeout", "internal", "budget_exceeded"
]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class EventSource(_Wire):
    """Where the event came from (informational)."""

    platform: Annotated[str, StringConstraints(max_length=64)] | None = None
    channel: Annotated[str, StringConstraints(max_length=64)] | None = None


class Annotation(_Wire):
    """An annotation of the event; those of kind ``prompt`` form the user message."""

    kind: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    text: str = ""
    lang: Annotated[str, StringConstraints(max_length=35)] | None = None


class ToolTrace(_Wire):
    """Payload of ``tool.call`` and ``tool.result`` events."""

    tool_call_id: Identifier
    name: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    arguments: str = "{}"
    content: str = ""


MAX_TRANSCRIPT_MESSAGES = 500


class TranscriptMessage(_Wire):
    """One message of a ``transcript`` event: something already said, imported as it was."""

    role: Literal["user", "assistant"]
    text: Annotated[str, StringConstraints(min_length=1, pattern=r"\S")] = Field(
        description="What was said (not blank; the body limit bounds its length)."
    )
    name: Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,64}$")] | None = (
        Field(None, description="The speaker's display name (at most 64 characters).")
    )
    created_at: AwareDatetime | None = Field(
        None, description="When it was said (RFC 3339); the event's created_at by default."
    )


class InternalEventV2(_Wire):
    """A chat event published to the ingress routing key."""

    schema_: Annotated[str, StringConstraints(pattern=r"^internal\.event\.v2(\.[0-9]+)?$")] = Field(
        alias="schema",
        description="'internal.event.v2' (a minor suffix such as '.1' is accepted)",
    )
    id: Identifier = Field(description="Unique per event; the idempotency key.")
    type: EventType
    tenant_id: Identifier
    user_id: Identifier
    conversation_id: ConversationSelector = Field(
        description="Conversation id; '*' only with type memory.forget (all conversations)."
    )
    created_at: AwareDatetime
    source: EventSource | None = None
    annotations: list[Annotation] = Field(default_factory=list, max_length=256)
    metadata: dict[
        Annotated[str, StringConstraints(min_length=1, max_length=64)], MetadataValue
    ] = Field(default_factory=dict, max_length=64)
    tool: ToolTrace | None = Field(
        None, description="Required for tool.call and tool.result events."
    )
    tools: list[ToolDefinition] | None = Field(
        None,
        max_length=MAX_TOOLS,
        description="Functions the model may call for this message (OpenAI function "
        "definitions, names unique); its calls come back as a tool_call candidate.",
    )
    transcript: list[TranscriptMessage] | None = Field(
        None,
        min_length=1,
        max_length=MAX_TRANSCRIPT_MESSAGES,
        description="Required for transcript events: the messages to record, in order "
        "(larger histories: several events, published in order).",
    )

    @model_validator(mode="after")
    def _check_type_fields(self) -> InternalEventV2:
        if self.conversation_id == "*" and self.type != "memory.forget":
            raise ValueError("conversation_id '*' is only valid for memory.forget")
        if self.type in ("tool.call", "tool.result") and self.tool is None:
            raise ValueError(f"{self.type} events need a 'tool' object")
        if self.type == "transcript" and self.transcript is None:
            raise ValueError("transcript events need a 'transcript' list")
        names = [tool.function.name for tool in self.tools or ()]
        if len(names) != len(set(names)):
            raise ValueError("tools: function names must be unique")
        return self

    def prompt_text(self) -> str:
        """All ``prompt`` annotations joined in order with a blank line between them."""
        parts = [a.text for a in self.annotations if a.kind == "prompt" and a.text.strip()]
        return "\n\n".join(parts)


class CandidateUsage(_Wire):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cached_input_tokens: int = Field(
        0,
        ge=0,
        description="Of input_tokens, those the provider served from its prompt cache "
        "(0 when it reports none).",
    )


class CandidateMemory(_Wire):
    window_messages: int = Field(ge=0, description="Messages of the window sent to the model.")
    summary: bool = Field(description="Whether a rolling summary was in context.")
    long_term_items: int = Field(ge=0)
    context_tokens: int = Field(ge=0, description="Estimated tokens of the assembled context.")
    recalled_items: int = Field(
        0,
        ge=0,
        description="Items retrieval recalled into the prompt (the memory message's `recalled`).",
    )
    shortened: bool = Field(
        False, description="The current message was shortened to fit the input budget."
    )


class CandidateV1(_Wire):
    """A proposed reply, published to the candidate routing key."""

    schema_: Literal["candidate.v1"] = Field("candidate.v1", alias="schema")
    id: Annotated[str, StringConstraints(pattern=r"^cand_")] = Field(
        description=(
            "'cand_' + event id + '.' + 16 hex digits of SHA-256 over tenant and user: a "
            "redelivery republishes the same id, and the same event id in two tenants or "
            "users (two distinct events) gives two ids."
        )
    )
    event_id: Identifier
    tenant_id: Identifier
    user_id: Identifier
    conversation_id: Identifier
    turn: int = Field(ge=1, description="1-based turn number in the conversation.")
    kind: Literal["text", "tool_call"] = Field(
        "text",
        description="text: a reply; tool_call: the model asks for tools (tool_calls), the "
        "turn continues when each call's tool.result arrives.",
    )
    status: Literal["proposed"] = "proposed"
    text: str
    tool_calls: list[CandidateToolCall] | None = Field(
        None, description="With kind tool_call: the calls to run, each answered by a tool.result."
    )
    created_at: datetime
    model: str
    usage: CandidateUsage
    memory: CandidateMemory

    @model_validator(mode="after")
    def _check_kind(self) -> CandidateV1:
        if (self.kind == "tool_call") != bool(self.tool_calls):
            raise ValueError("tool_calls are required with kind tool_call, and only then")
        return self


class CandidateDeltaV1(_Wire):
    """A piece of a reply being streamed, published to the event's AMQP ``reply_to`` (best
    effort, not persisted): the final CandidateV1 follows and is the truth."""

    schema_: Literal["candidate.delta.v1"] = Field("candidate.delta.v1", alias="schema")
    candidate_id: Annotated[str, StringConstraints(pattern=r"^cand_")] = Field(
        description="The id of the CandidateV1 this delta belongs to."
    )
    event_id: Identifier
    seq: int = Field(
        ge=0,
        description="0, 1, 2, ... within one model call; a retried call after a failure "
        "midway starts again at 0 (its text replaces the earlier attempt's).",
    )
    delta: str = Field(description="The next piece of the reply's text.")


class ErrorV1(_Wire):
    """A terminal failure of an event, published to the error routing key."""

    schema_: Literal["llmbot.error.v1"] = Field("llmbot.error.v1", alias="schema")
    event_id: Identifier
    tenant_id: Identifier
    user_id: Identifier
    conversation_id: ConversationSelector
    code: ErrorCode
    message: Annotated[str, StringConstraints(max_length=1024)]
    attempts: int = Field(ge=1)
    created_at: datetime


AnswerValue = int | bool | str | None


class FlowAnswer(_Wire):
    """One question's answer in a flow's result."""

    question_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] = Field(
        description="The question's id; a follow-up's is ``<question id>.follow_up_<n>``."
    )
    value: AnswerValue = Field(
        description="The answer as its type reads it (scale: integer, boolean, choice: the "
        "option, text: the text); null when it was never given (retries used up, or the "
        "flow ended first)."
    )
    raw: str | None = Field(description="What the user last wrote for it (null: not asked).")
    attempts: int = Field(ge=0, description="How many replies it took (0: not asked).")


class FlowResultV1(_Wire):
    """The answers of a flow (SPEC 5.10), published to ``internal.flow.result.v1`` once the
    flow completed, was exited or expired. ``id`` is stable: a republish carries the same."""

    schema_: Literal["flow.result.v1"] = Field("flow.result.v1", alias="schema")
    id: Annotated[str, StringConstraints(pattern=r"^flow_")]
    flow: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    tenant_id: Identifier
    user_id: Identifier
    conversation_id: Identifier
    status: Literal["completed", "exited", "expired"]
    answers: list[FlowAnswer]
    started_at: datetime
    finished_at: datetime


class MemoryJobV1(_Wire):
    """Background work for the memory worker, published to the memory-jobs routing key.

    ``turn``: a turn was committed (classify its user message, compact evicted turns).
    ``finalize``: the conversation ended or went idle (summarize the rest, drop working memory).
    Jobs are hints: the worker reads the truth from Redis, so a job may be repeated or lost
    without losing or doubling memory.
    """

    schema_: Literal["llmbot.memory_job.v1"] = Field("llmbot.memory_job.v1", alias="schema")
    id: Identifier = Field(description="Idempotency key of the job.")
    kind: Literal["turn", "finalize"]
    tenant_id: Identifier
    user_id: Identifier
    conversation_id: Identifier
    turn: int = Field(ge=0, description="The conversation's last turn when the job was made.")
    event_id: Identifier | None = None
    prompt_tokens: int | None = Field(
        None, ge=0, description="Provider-reported prompt tokens of the turn's model call."
    )
    created_at: datetime


def derived_id(prefix: str, event_id: str) -> str:
    """The id of something made for an event (``job`` for its turn's memory job, ``fin``
    for a finalize job): ``<prefix>_<event id>`` when that fits an id's 128 characters;
    else ``<prefix>h_`` + the head of the event id + ``.`` + 16 hex digits of its SHA-256,
    128 characters. Deterministic (a redelivery derives the same id) and never invalid for a
    valid event id: a 125-character event id once made a job id the job's own schema
    refused, after the turn was committed. The ``h`` keeps the two forms apart: an event id
    starts with a letter or digit, so ``<prefix>_<event id>`` never starts ``<prefix>h_``."""
    whole = f"{prefix}_{event_id}"
    if len(whole) <= ID_MAX_LENGTH:
        return whole
    digest = hashlib.sha256(event_id.encode()).hexdigest()[:16]
    head = event_id[: ID_MAX_LENGTH - len(prefix) - 3 - len(digest)]
    return f"{prefix}h_{head}.{digest}"


def candidate_id(tenant_id: str, user_id: str, event_id: str) -> str:
    """The candidate id of an event: ``cand_<event id>.<16 hex digits>``, the digits from a
    SHA-256 over tenant and user (SPEC 3: stable across redeliveries, distinct for distinct
    events). Events are deduplicated per tenant and user, so the same event id in two
    tenants (or two users) is two events; with the event id alone their candidates would
    share an id and a subscriber deduplicating by id would drop one tenant's reply. The
    event id stays readable in front; ids cannot contain the separator (0x1f) hashed
    between tenant and user, so two pairs never hash the same input."""
    return _scoped_id("cand", tenant_id, user_id, event_id)


def flow_result_id(tenant_id: str, user_id: str, event_id: str) -> str:
    """The FlowResultV1 id of the flow started by an event: ``flow_<event id>.<16 hex>``,
    scoped to tenant and user like :func:`candidate_id`."""
    return _scoped_id("flow", tenant_id, user_id, event_id)


def _scoped_id(prefix: str, tenant_id: str, user_id: str, event_id: str) -> str:
    scope = hashlib.sha256(f"{tenant_id}\x1f{user_id}".encode()).hexdigest()[:16]
    return f"{prefix}_{event_id}.{scope}"
