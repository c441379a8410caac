"""A flow's progress, pure: prompts, answers, retries, follow-ups, exits and the result."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_bot.flows.answers import NOT_ANSWERED, Answer
from llm_bot.flows.definitions import Flow
from llm_bot.flows.progress import (
    FlowState,
    Reply,
    abandoned,
    advance,
    current_question,
    flow_result,
    opening,
    read_answer,
    realigned,
    valid_value,
)
from llm_bot.memory.conversation_key import ConversationKey

FLOW = Flow.model_validate(
    {
        "intro": "Quick check-in.",
        "questions": [
            {
                "id": "mood",
                "type": "scale",
                "text": "Mood from 1 to 10?",
                "retries": 1,
                "follow_ups": [
                    {"text": "Why so low?", "when": {"at_most": 4}},
                    {"text": "Anything else?"},
                ],
            },
            {"id": "slept", "type": "boolean", "text": "Slept well?"},
            {"id": "drink", "type": "choice", "text": "Drink?", "options": ["tea", "coffee"]},
        ],
        "exit_intents": ["not now"],
    }
)
KEY = ConversationKey("t", "u", "c")


def _start() -> FlowState:
    return opening(
        FLOW,
        flow_id="flow_e0.x",
        name="checkin",
        persona="checkin",
        event_id="e0",
        at="2026-01-01T00:00:00+00:00",
    )


def _run(*texts: str) -> FlowState:
    state = _start()
    for n, text in enumerate(texts, start=1):
        question = current_question(FLOW, state)
        answer = read_answer(question, text) if question else Answer(text)
        state = advance(FLOW, state, Reply(f"e{n}", text, f"2026-01-01T00:0{n}:00+00:00"), answer)
    return state


def _answers(state: FlowState) -> list[tuple[str, object, int]]:
    return [(a["question_id"], a["value"], a["attempts"]) for a in state["answers"]]


def test_the_opening_says_the_intro_and_the_first_question() -> None:
    state = _start()
    assert state["prompt"] == "Quick check-in. Mood from 1 to 10?"
    assert state["status"] == "running"
    assert current_question(FLOW, state) == FLOW.questions[0]


def test_a_low_score_asks_both_follow_ups_a_high_one_only_the_unconditional() -> None:
    low = _run("2", "work", "nothing", "yes", "tea")
    assert low["status"] == "completed"
    assert _answers(low) == [
        ("mood", 2, 1),
        ("mood.follow_up_1", "work", 1),
        ("mood.follow_up_2", "nothing", 1),
        ("slept", True, 1),
        ("drink", "tea", 1),
    ]
    high = _run("9")
    assert high["prompt"] == "Anything else?"


def test_unanswered_questions_are_asked_again_then_recorded_missing() -> None:
    again = _run("blue")
    assert again["prompt"].startswith("Sorry, I didn't catch that. Mood from 1 to 10?")
    assert again["attempts"] == 1
    assert again["pending_raw"] == "blue"
    moved = _run("blue", "green")
    assert moved["prompt"] == "Slept well?"
    assert _answers(moved) == [("mood", None, 2)]
    assert moved["answers"][0]["raw"] == "green"


@pytest.mark.parametrize("text", ["stop", "not now", "ไม่ทำแล้ว", "no more questions", "bye!"])
def test_exit_intents_end_the_flow(text: str) -> None:
    state = _run("7", "fine", text)
    assert state["status"] == "exited"
    assert state["prompt"] == FLOW.exited_text


def test_a_long_answer_that_mentions_stopping_is_an_answer() -> None:
    state = _run("3", "I want to stop worrying about money all the time")
    assert state["status"] == "running"
    assert state["answers"][-1]["value"] == "I want to stop worrying about money all the time"


def test_the_result_lists_every_question_in_order() -> None:
    state = _run("9", "ok", "blue")  # exits nothing; waits on "slept" after one miss
    result = flow_result(
        FLOW, state, KEY, status="expired", finished_at=datetime(2026, 1, 2, tzinfo=UTC)
    )
    assert [(a.question_id, a.value, a.raw, a.attempts) for a in result.answers] == [
        ("mood", 9, "9", 1),
        ("mood.follow_up_2", "ok", "ok", 1),
        ("slept", None, "blue", 1),
        ("drink", None, None, 0),
    ]
    assert result.status == "expired"
    assert result.id == "flow_e0.x"
    assert result.started_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_a_models_reading_is_checked_like_any_answer() -> None:
    scale, boolean, choice = FLOW.questions
    assert valid_value(scale, 7) == 7
    assert valid_value(scale, 11) is None
    assert valid_value(scale, True) is None  # a bool is not a score
    assert valid_value(boolean, False) is False
    assert valid_value(boolean, "yes") is None
    assert valid_value(choice, "coffee") == "coffee"
    assert valid_value(choice, "juice") is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=40))
def test_any_replies_end_the_flow_within_its_bound_and_never_lose_a_question(
    replies: list[str],
) -> None:
    state = _start()
    for n, text in enumerate(replies):
        if state["status"] != "running":
            break
        question = current_question(FLOW, state)
        answer: Any = read_answer(question, text) if question else Answer(text.strip() or None)
        if answer.ambiguous:
            answer = NOT_ANSWERED
        state = advance(FLOW, state, Reply(f"e{n}", text, "2026-01-01T00:00:00+00:00"), answer)
    result = flow_result(FLOW, state, KEY, status="expired", finished_at=datetime.now(UTC))
    asked = [a.question_id.split(".")[0] for a in result.answers]
    assert sorted(set(asked), key=asked.index) == ["mood", "slept", "drink"]
    # every question: retries + 1 replies at most, plus at most 2 follow-ups
    most = sum(q.retries + 1 + len(q.follow_ups) for q in FLOW.questions)
    assert state["status"] != "running" or len(replies) < most


def test_a_redefined_flow_continues_at_the_same_question_wherever_it_moved() -> None:
    state = _run("9")  # waiting on mood's unconditional follow-up (index 1)
    moved = Flow.model_validate(
        {
            "questions": [
                {"id": "intro", "type": "text", "text": "New first question?"},
                {"id": "mood", "type": "scale", "text": "Mood?", "follow_ups": [{"text": "Why?"}]},
                {"id": "slept", "type": "boolean", "text": "Slept?"},
            ]
        }
    )
    now = realigned(moved, state)
    assert now is not None
    assert now["position"] == 1
    assert now["follow_ups"] == []  # follow-up 2 no longer exists
    assert realigned(FLOW, state) == state
    gone = Flow.model_validate({"questions": [{"id": "other", "type": "text", "text": "Hm?"}]})
    assert realigned(gone, state) is None
    assert realigned(None, state) is None


def test_an_abandoned_flow_reports_what_was_answered() -> None:
    state = abandoned(_run("9", "fine"), Reply("e9", "yes", "2026-01-01T00:09:00+00:00"), "Bye.")
    assert state["status"] == "exited"
    assert state["prompt"] == "Bye."
    result = flow_result(None, state, KEY, status="exited", finished_at=datetime.now(UTC))
    assert [(a.question_id, a.value) for a in result.answers] == [
        ("mood", 9),
        ("mood.follow_up_2", "fine"),
    ]
