"""A message in the first person names its writer: the detector, English and Thai."""

from __future__ import annotations

import pytest

from llm_bot.memory.first_person import ASKER, asker_of, speaks_of_writer


@pytest.mark.parametrize(
    "text",
    [
        "How many citrus fruits have I used in my cocktail recipes?",
        "what did i buy for my sister",
        "Can you remind me of the deli's name?",
        "Is this one mine?",
        "I\u2019m planning a trip",  # a curly apostrophe
        "I've been struggling with the slow cooker",
        "I did it myself",
        "ฉันชื่ออะไร",
        "ดิฉันสั่งอะไรไปคะ",
        "ผมไปเที่ยวที่ไหนมา",
        "เราคุยเรื่องอะไรกันไว้",
    ],
)
def test_the_first_person_names_the_asker(text: str) -> None:
    assert speaks_of_writer(text)
    assert asker_of(text) == ASKER == "user"


@pytest.mark.parametrize(
    "text",
    [
        "What did Melanie paint?",
        "When is Caroline's birthday?",
        "Which iPhone is best for the IT team?",  # "I" inside words
        "Use a stand mixer, i.e. the one with a bowl",  # not the pronoun
        "Tell us about the AI",
        "ตัดผมครั้งล่าสุดเมื่อไหร่",  # hair, not "I"
        "เพลงนี้ไพเราะไหม",  # melodious, not "we"
        "แมวของหนูชื่ออะไร",  # หนู: left out (also "mouse", and "you" to a child)
        "",
    ],
)
def test_no_first_person_names_nobody(text: str) -> None:
    assert not speaks_of_writer(text)
    assert asker_of(text) is None
