"""Which recorded texts state a value a correction replaced (English and Thai)."""

from __future__ import annotations

import pytest

from llm_bot.memory.long_term import EpisodicSummary, SemanticFact, Source
from llm_bot.memory.retention import select_bundle
from llm_bot.memory.stale_statements import corrections, restates_corrected, states_replaced_value

BUDGET = ("The user's budget is 300 baht.", "The user's budget is 450 baht.")
DIET = ("The user is vegetarian.", "The user is not vegetarian.")
HOME = ("The user lives in Bangkok.", "The user lives in Chiang Mai.")
DRINK = ("The user prefers tea in the morning.", "The user prefers coffee in the morning.")
THAI_DIET = ("ผู้ใช้เป็นมังสวิรัติ", "ผู้ใช้ไม่ได้เป็นมังสวิรัติ")


@pytest.mark.parametrize(
    ("message", "correction", "stale"),
    [
        ("Hi there. My budget is 300 baht for this.", BUDGET, True),
        ("Actually, my budget is now 450 baht.", BUDGET, False),  # the correction itself
        ("I want to buy 300 of them.", BUDGET, False),  # the number, not the topic
        ("Hi! I am vegetarian, just so you know.", DIET, True),
        ("Update: I'm not vegetarian anymore.", DIET, False),
        ("hello, my name is Ann", DIET, False),
        ("I live in Bangkok near the river", HOME, True),
        ("I moved to Chiang Mai last month", HOME, False),
        ("I prefer tea in the morning", DRINK, True),
        ("The tea set arrived broken", DRINK, False),  # the old word, not the topic
        ("สวัสดีครับ ผมเป็นมังสวิรัติ", THAI_DIET, True),
        ("ตอนนี้ผมไม่ได้เป็นมังสวิรัติแล้วครับ", THAI_DIET, False),
    ],
)
def test_a_message_states_the_replaced_value(
    message: str, correction: tuple[str, str], stale: bool
) -> None:
    assert states_replaced_value(message, *correction) is stale


def fact(fact_id: str, text: str, superseded_by: str | None = None) -> SemanticFact:
    return SemanticFact(
        id=fact_id,
        fact=text,
        confidence=0.9,
        salience=0.5,
        sources=(Source(conversation_id="c1", turns=(1, 2)),),
        created_at="2025-01-01T00:00:00+00:00",
        updated_at="2025-01-01T00:00:00+00:00",
        superseded_by=superseded_by,
    )


def episode(
    episode_id: str, conversation: str, turns: tuple[int, ...], text: str
) -> EpisodicSummary:
    return EpisodicSummary(
        id=episode_id,
        conversation_id=conversation,
        turns=turns,
        summary=text,
        salience=0.5,
        created_at="2025-01-01T00:00:00+00:00",
    )


def test_episodes_that_restate_a_corrected_value_leave_the_bundle() -> None:
    """Only an episode of the old fact's own turns that states its old value goes."""
    facts = [fact("old", BUDGET[0], superseded_by="new"), fact("new", BUDGET[1])]
    stale = episode("e1", "c1", (1, 2), "The user said the budget is 300 baht.")
    other_turns = episode("e2", "c1", (5, 6), "The user said the budget is 300 baht.")
    unrelated = episode("e3", "c1", (1, 2), "The user asked about kettles.")
    replaced = corrections(facts)
    assert restates_corrected(stale.summary, "c1", stale.turns, replaced)
    assert not restates_corrected(stale.summary, "c2", stale.turns, replaced)
    bundle = select_bundle(
        profile=[], facts=facts, episodes=[stale, other_turns, unrelated], events=[]
    )
    assert [e.id for e in bundle.episodes] == ["e2", "e3"]
    assert [f.id for f in bundle.facts] == ["new"]
