"""Wire contract: versioned message schemas exchanged over RabbitMQ (SPEC section 3)."""

from llm_bot.contract.messages import (
    Annotation,
    CandidateDeltaV1,
    CandidateMemory,
    CandidateUsage,
    CandidateV1,
    ErrorCode,
    ErrorV1,
    EventSource,
    FlowAnswer,
    FlowResultV1,
    InternalEventV2,
    MemoryJobV1,
    ToolTrace,
    TranscriptMessage,
)
from llm_bot.contract.tools import CandidateToolCall, ToolDefinition

__all__ = [
    "Annotation",
    "CandidateDeltaV1",
    "CandidateMemory",
    "CandidateToolCall",
    "CandidateUsage",
    "CandidateV1",
    "ErrorCode",
    "ErrorV1",
    "EventSource",
    "FlowAnswer",
    "FlowResultV1",
    "InternalEventV2",
    "MemoryJobV1",
    "ToolDefinition",
    "ToolTrace",
    "TranscriptMessage",
]
