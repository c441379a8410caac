"""``build_candidate`` (``graph/candidate.py``): a text reply or the model's tool calls as
CandidateV1, the assistant's message after the turn's, and a round opened by calls."""

from __future__ import annotations

from typing import Any

from llm_bot.graph.candidate import build_candidate
from llm_bot.graph.state import GraphState
from llm_bot.memory.context import AssembledContext
from llm_bot.memory.messages import ChatMessage
from llm_bot.ports import ModelReply
from tests.support.reply_path import START, function, message, reply_path, tool_calls_reply

CONTEXT = AssembledContext(
    messages=[],
    tokens=120,
    budget=8000,
    over_budget=False,
    long_term_items=2,
    summary_included=True,
    dropped={},
    window_messages=3,
)


def state(reply: ModelReply, **extra: Any) -> GraphState:
    event = message("hi", event_id="evt_cand1")
    asked = ChatMessage(
        id="evt_cand1:user", role="user", content="hi", created_at="x", turn=4, seq=0
    )
    base: GraphState = {
        "event": event,
        "reply": reply,
        "turn": 4,
        "turn_messages": [asked],
        "context": CONTEXT,
    }
    base.update(extra)  # type: ignore[typeddict-item]  # the keys of GraphState only
    return base


def test_a_text_reply_becomes_a_text_candidate() -> None:
    """The candidate carries the event, turn, text, usage and what memory gave the prompt;
    the assistant's message follows the user's in the turn; no round is opened."""
    path = reply_path()
    reply = ModelReply("Hello!", "m", input_tokens=100, output_tokens=3, cached_input_tokens=64)
    update = build_candidate(
        state(reply), now=START, bounds=path.context.bounds, metrics=path.metrics
    )
    candidate = update["candidate"]
    assert (candidate.kind, candidate.text, candidate.turn) == ("text", "Hello!", 4)
    assert candidate.event_id == "evt_cand1"
    assert candidate.usage.cached_input_tokens == 64
    assert (candidate.memory.window_messages, candidate.memory.long_term_items) == (3, 2)
    assistant = update["turn_messages"][-1]
    assert (assistant.role, assistant.seq, assistant.content) == ("assistant", 1, "Hello!")
    assert update["tool_round"] is None


def test_tool_calls_with_tools_offered_open_the_next_round() -> None:
    """Calls while tools were offered: a ``tool_call`` candidate and round
    ``rounds_done + 1`` awaiting each call (counted as ``opened``)."""
    path = reply_path()
    graph_state = state(tool_calls_reply("a", "b"), tools=(function("a"),), rounds_done=1)
    update = build_candidate(
        graph_state, now=START, bounds=path.context.bounds, metrics=path.metrics
    )
    assert update["candidate"].kind == "tool_call"
    assert [c.id for c in update["candidate"].tool_calls] == ["call_a", "call_b"]
    opened = update["tool_round"]
    assert (opened.round, opened.calls, opened.turn) == (2, ("call_a", "call_b"), 4)
    assert path.counted("llmbot_tool_rounds", result="opened") == 1


def test_calls_when_no_tools_were_offered_do_not_count() -> None:
    """The last round offers no tools: calls the model makes anyway are ignored."""
    path = reply_path()
    update = build_candidate(
        state(tool_calls_reply("a")), now=START, bounds=path.context.bounds, metrics=path.metrics
    )
    assert update["candidate"].kind == "text"
    assert update["tool_round"] is None
