"""The port through which the handler runs a chat command (:class:`ChatEvent`) through
the reply graph, and what a run produced.

The graph implements it (``graph/runner.py``) and ``bootstrap`` wires it in: the graph
depends on the service, never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from llm_bot.contract import CandidateV1, FlowResultV1, MemoryJobV1
from llm_bot.service.commands import ChatEvent


class Route(StrEnum):
    """Where a run of the reply graph went, as its state carries it and the handler matches
    it (exhaustively: a new route is a type error until the handler handles it)."""

    SKIP = "skip"
    """A message without prompt text."""
    DUPLICATE = "duplicate"
    """An event answered before: its stored candidate again."""
    TOOL = "tool"
    """A tool call or result recorded."""
    TOOL_DUPLICATE = "tool_duplicate"
    """A tool result for a call already answered."""
    TRANSCRIPT = "transcript"
    """An imported transcript recorded."""
    REPLY = "reply"
    CONTINUE = "continue"
    """A tool result completed its round: the model is called again."""
    FLOW = "flow"
    """The message goes to the conversation's flow (chosen by ``supervisor``)."""


@dataclass(frozen=True)
class ChatRun:
    """What a run of the reply graph produced: its route, and what it made on the way."""

    route: Route
    turn: int | None = None
    """The conversation's turn the event went into (None: the run never assigned one)."""
    candidate: CandidateV1 | None = None
    job: MemoryJobV1 | None = None
    flow_result: FlowResultV1 | None = None
    """The result of the flow the event ended, if it ended one."""


class ChatRunner(Protocol):
    """Runs one chat command through the reply graph, under the conversation's lease."""

    async def run(self, event: ChatEvent, lease_token: str | None) -> ChatRun: ...
