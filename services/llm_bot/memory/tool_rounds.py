"""Tool rounds (SPEC 5.9): the model asks for tools, the integrator answers, the turn
goes on; and no prompt ever holds half a tool exchange. Pure.

A **round** is one assistant message with ``tool_calls``; it is open until every call has
a ``tool`` message. The conversation's working memory keeps the open round
(:class:`ToolRound`): which calls, which are answered, which tools were offered (the
continuation offers them again) and when it opened. A new user message closes the open
calls first with an explicit "no result" tool message (:func:`closing_messages`), as the
timeout does: providers reject a call without its result.

:func:`canonical_tool_sequence` is the safety net of every prompt: each assistant message
with calls is followed, in call order, by exactly one tool message per call (its first
result wherever it was recorded, else a "no result" placeholder), and tool messages that
answer no call in the window (a result whose call was compacted away, a duplicate) are
left out. Memory keeps everything as recorded; only the prompt is normalised.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from llm_bot.memory.messages import ChatMessage

NoResultReason = Literal["timeout", "user_moved_on", "missing"]


def no_result(reason: NoResultReason) -> str:
    """The content of a tool message standing in for a result that never came."""
    why = {
        "timeout": "the tool did not answer in time",
        "user_moved_on": "the user sent a new message before the tool answered",
        "missing": "no result was recorded for this call",
    }[reason]
    return json.dumps({"error": "no_result", "reason": why})


class ToolRound(BaseModel):
    """The open round of a conversation: an assistant message's calls awaiting results."""

    model_config = ConfigDict(frozen=True)

    round: int
    """1 for the turn's first round of calls, then 2, 3, ..."""
    turn: int
    calls: tuple[str, ...]
    """Call ids, in the order the model gave them."""
    names: tuple[str, ...] = ()
    answered: tuple[str, ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    """The tool definitions offered in this turn (the continuation offers them again)."""
    opened_at: str

    def open_calls(self) -> tuple[str, ...]:
        return tuple(call for call in self.calls if call not in self.answered)

    def complete(self) -> bool:
        return not self.open_calls()

    def answer(self, call_id: str) -> ToolRound:
        return self.model_copy(update={"answered": (*self.answered, call_id)})


def closing_messages(
    open_round: ToolRound,
    *,
    event_id: str,
    next_seq: int,
    created_at: str,
    reason: NoResultReason,
) -> list[ChatMessage]:
    """A "no result" tool message for every unanswered call of ``open_round``, in its turn,
    numbered from ``next_seq``."""
    names = dict(zip(open_round.calls, open_round.names, strict=False))
    return [
        ChatMessage(
            id=f"{event_id}:no_result:{n}",
            role="tool",
            content=no_result(reason),
            created_at=created_at,
            turn=open_round.turn,
            seq=next_seq + n,
            event_id=event_id,
            tool_call_id=call_id,
            name=names.get(call_id),
        )
        for n, call_id in enumerate(open_round.open_calls())
    ]


def canonical_tool_sequence(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with every call followed by exactly one result, in call order, and no
    tool message that answers nothing (see the module's docstring)."""
    results: dict[str, ChatMessage] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id is not None:
            results.setdefault(message.tool_call_id, message)
    placed: set[str] = set()
    out: list[ChatMessage] = []
    for message in messages:
        if message.role == "tool":
            continue  # placed after its call, or answering nothing
        out.append(message)
        for n, call in enumerate(message.tool_calls):
            if call.id in placed:
                continue
            placed.add(call.id)
            result = results.get(call.id)
            out.append(
                result.model_copy(update={"turn": message.turn})  # with its call's turn
                if result is not None
                else ChatMessage(
                    id=f"{message.id}:no_result:{n}",
                    role="tool",
                    content=no_result("missing"),
                    created_at=message.created_at,
                    turn=message.turn,
                    seq=message.seq,
                    event_id=message.event_id,
                    tool_call_id=call.id,
                )
            )
    return out


def prompt_is_well_formed(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a Chat Completions prompt is one a provider accepts as to tools: every
    ``tool_calls`` entry answered by exactly one tool message right after it (before any
    other message), and every tool message answering such a call."""
    waiting: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                return False
            waiting.remove(call_id)
            continue
        if waiting:
            return False
        waiting = [call["id"] for call in message.get("tool_calls") or ()]
    return not waiting


__all__ = [
    "NoResultReason",
    "ToolRound",
    "canonical_tool_sequence",
    "closing_messages",
    "no_result",
    "prompt_is_well_formed",
]
