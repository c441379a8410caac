"""Tool rounds and the prompt's tool sequence (SPEC 5.9), and the tools on the wire."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_bot.contract import CandidateV1, InternalEventV2
from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.tool_rounds import (
    ToolRound,
    canonical_tool_sequence,
    closing_messages,
    prompt_is_well_formed,
)

T = "2025-07-01T10:00:00+00:00"


def msg(
    n: int, role: str, *, calls: tuple[str, ...] = (), answers: str | None = None
) -> ChatMessage:
    return ChatMessage(
        id=f"m{n}",
        role=role,
        content="" if calls else f"text {n}",
        created_at=T,
        turn=1 + n // 10,
        seq=n % 10,
        tool_calls=tuple(ToolCall(id=c, name="f") for c in calls),
        tool_call_id=answers,
    )


def prompt(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]


def test_results_follow_their_calls_missing_ones_are_filled_orphans_dropped() -> None:
    window = [
        msg(0, "user"),
        msg(1, "assistant", calls=("a", "b")),
        msg(2, "tool", answers="b"),
        msg(3, "tool", answers="zzz"),  # answers nothing in the window
        msg(4, "tool", answers="b"),  # a second result for b
        msg(10, "user"),
    ]
    out = canonical_tool_sequence(window)
    assert [(m.role, m.tool_call_id) for m in out] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
    ]
    assert json.loads(out[2].content)["error"] == "no_result"
    assert out[3].id == "m2"
    assert prompt_is_well_formed(prompt(out))
    assert not prompt_is_well_formed(prompt(window))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "call", "tool"]),
            st.sampled_from(["a", "b", "c", "d"]),
        ),
        max_size=20,
    )
)
def test_any_recorded_sequence_becomes_a_well_formed_prompt(steps: list[tuple[str, str]]) -> None:
    window = []
    for n, (kind, call) in enumerate(steps):
        if kind == "call":
            window.append(msg(n, "assistant", calls=(f"{call}{n}", f"{call}x{n}")))
        elif kind == "tool":
            earlier = [c.id for m in window for c in m.tool_calls] or [call]
            window.append(msg(n, "tool", answers=earlier[n % len(earlier)]))
        else:
            window.append(msg(n, kind))
    out = canonical_tool_sequence(window)
    assert prompt_is_well_formed(prompt(out))
    assert [m.id for m in out if m.role != "tool"] == [m.id for m in window if m.role != "tool"]


def test_closing_messages_answer_only_the_open_calls() -> None:
    open_round = ToolRound(
        round=1, turn=3, calls=("a", "b", "c"), names=("f", "g", "h"), answered=("b",), opened_at=T
    )
    closing = closing_messages(
        open_round, event_id="e9", next_seq=4, created_at=T, reason="timeout"
    )
    assert [(m.tool_call_id, m.turn, m.seq, m.name) for m in closing] == [
        ("a", 3, 4, "f"),
        ("c", 3, 5, "h"),
    ]
    assert "in time" in json.loads(closing[0].content)["reason"]
    assert open_round.answer("a").answer("c").complete()


def event(**fields: Any) -> dict[str, Any]:
    base = {
        "schema": "internal.event.v2",
        "id": "e1",
        "type": "message",
        "tenant_id": "t",
        "user_id": "u",
        "conversation_id": "c",
        "created_at": T,
        "annotations": [{"kind": "prompt", "text": "hi"}],
    }
    return {**base, **fields}


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_an_event_offers_up_to_64_uniquely_named_tools() -> None:
    assert (
        len(
            InternalEventV2.model_validate(event(tools=[tool(f"f{n}") for n in range(64)])).tools
            or []
        )
        == 64
    )
    for bad in (
        [tool(f"f{n}") for n in range(65)],
        [tool("same"), tool("same")],
        [tool("has space")],
        [{"type": "retrieval", "function": {"name": "f"}}],
        [{"type": "function"}],
    ):
        with pytest.raises(ValidationError):
            InternalEventV2.model_validate(event(tools=bad))


def test_a_tool_call_candidate_carries_its_calls_and_only_it_does() -> None:
    base = {
        "id": "cand_e1.0",
        "event_id": "e1",
        "tenant_id": "t",
        "user_id": "u",
        "conversation_id": "c",
        "turn": 1,
        "text": "",
        "created_at": T,
        "model": "m",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "memory": {
            "window_messages": 1,
            "summary": False,
            "long_term_items": 0,
            "context_tokens": 1,
        },
    }
    calls = [{"id": "call_1", "name": "f", "arguments": "{}"}]
    assert CandidateV1.model_validate({**base, "kind": "tool_call", "tool_calls": calls}).tool_calls
    for bad in ({"kind": "tool_call"}, {"kind": "text", "tool_calls": calls}):
        with pytest.raises(ValidationError):
            CandidateV1.model_validate({**base, **bad})
