"""Flows declared as data: what validates, what is refused, when follow-ups apply."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from llm_bot.flows.definitions import Condition, Flow

CHECKIN = """
questions:
  - id: mood
    type: scale
    text: How are you feeling today, from 1 to 10?
    follow_ups:
      - text: What is weighing on you?
        when: {at_most: 4}
  - id: slept
    type: boolean
    text: Did you sleep well?
    retries: 1
    follow_ups:
      - {text: "What kept you awake?", when: {equals: false}}
  - id: drink
    type: choice
    options: [coffee, tea, water]
    text: What will you drink?
  - id: notes
    type: text
    text: Anything else?
exit_intents: [enough for today]
"""


def test_a_checkin_flow_validates_with_defaults() -> None:
    flow = Flow.model_validate(yaml.safe_load(CHECKIN))
    assert [q.id for q in flow.questions] == ["mood", "slept", "drink", "notes"]
    assert [q.retries for q in flow.questions] == [2, 1, 2, 2]
    assert flow.questions[0].follow_ups[0].when.holds(3)
    assert not flow.questions[0].follow_ups[0].when.holds(5)
    assert flow.questions[1].follow_ups[0].when.holds(False)
    assert not flow.questions[1].follow_ups[0].when.holds(True)
    assert Condition().holds("anything")


def _question(**fields: Any) -> dict[str, Any]:
    question: dict[str, Any] = {"id": "q", "type": "scale", "text": "How much?"}
    question.update(fields)
    return question


@pytest.mark.parametrize(
    ("flow", "complaint"),
    [
        ({"questions": []}, "at least 1"),
        ({"questions": [_question(type="choice")]}, "options are required"),
        ({"questions": [_question(options=["a", "b"])]}, "only for it"),
        ({"questions": [_question(type="date")]}, "type"),
        ({"questions": [_question(), _question()]}, "unique"),
        ({"questions": [_question(retries=9)]}, "retries"),
        ({"questions": [_question(text="  ")]}, "text"),
        ({"questions": [_question(colour="red")]}, "colour"),
        (
            {"questions": [_question(follow_ups=[{"text": "why?"}] * 3)]},
            "follow_ups",
        ),
        (
            {
                "questions": [
                    _question(type="boolean", follow_ups=[{"text": "?", "when": {"at_most": 2}}])
                ]
            },
            "for scale questions",
        ),
        (
            {
                "questions": [
                    _question(
                        type="choice",
                        options=["a", "b"],
                        follow_ups=[{"text": "?", "when": {"equals": "c"}}],
                    )
                ]
            },
            "not an option",
        ),
    ],
)
def test_bad_flows_are_refused(flow: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValidationError, match=complaint):
        Flow.model_validate(flow)
