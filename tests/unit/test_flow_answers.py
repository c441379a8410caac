"""A flow's answers read without a model: numbers, yes/no, choices, exit, EN and TH."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_bot.flows.answers import (
    AMBIGUOUS,
    NOT_ANSWERED,
    Answer,
    read_boolean,
    read_choice,
    read_scale,
    read_text,
    wants_to_exit,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7", Answer(7)),
        ("I'd say 7/10", Answer(7)),
        ("8 out of 10", Answer(8)),
        ("seven", Answer(7)),
        ("Ten!", Answer(10)),
        ("เจ็ด", Answer(7)),
        ("ประมาณ ๘ ครับ", Answer(8)),
        ("ให้ 5 เต็ม 10", Answer(5)),
        ("6 or 7", AMBIGUOUS),
        ("between five and 6", AMBIGUOUS),
        ("11", NOT_ANSWERED),
        ("0", NOT_ANSWERED),
        ("6.5", NOT_ANSWERED),
        ("pretty good", NOT_ANSWERED),
        ("someone said", NOT_ANSWERED),
    ],
)
def test_scale(text: str, expected: Answer) -> None:
    assert read_scale(text) == expected


@given(st.integers(1, 10), st.sampled_from(["{}", "about {}", "{}/10", "ให้ {} คะแนน", " {} "]))
def test_any_number_in_range_in_any_frame_is_read(number: int, frame: str) -> None:
    assert read_scale(frame.format(number)) == Answer(number)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", Answer(True)),
        ("Yeah, I did", Answer(True)),
        ("sure", Answer(True)),
        ("no", Answer(False)),
        ("Not really", Answer(False)),
        ("I didn't", Answer(False)),
        ("ใช่ครับ", Answer(True)),
        ("ได้ค่ะ", Answer(True)),
        ("ไม่ครับ", Answer(False)),
        ("ไม่ได้นอนเลย", Answer(False)),
        ("ไม่เคยค่ะ", Answer(False)),
        ("ไม่ ครับ", Answer(False)),
        ("ใช่ แต่ไม่ค่อย", AMBIGUOUS),
        ("yes and no", AMBIGUOUS),
        ("I know", NOT_ANSWERED),
        ("nothing to say", NOT_ANSWERED),
    ],
)
def test_boolean(text: str, expected: Answer) -> None:
    assert read_boolean(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Coffee", Answer("coffee")),
        ("green tea please", Answer("green tea")),
        ("the 2nd one", NOT_ANSWERED),
        ("2", Answer("tea")),
        ("coffee or tea", AMBIGUOUS),
        ("1 and 3", AMBIGUOUS),
        ("water", NOT_ANSWERED),
        ("7", NOT_ANSWERED),
    ],
)
def test_choice(text: str, expected: Answer) -> None:
    assert read_choice(text, ["coffee", "tea", "green tea"]) == expected


def test_text_and_exit() -> None:
    assert read_text("  slept   badly ") == Answer("slept badly")
    assert read_text("   ") == NOT_ANSWERED
    for text in ("stop", "Bye!", "I want to stop now", "ไม่ทำแล้วครับ", "พอแล้ว"):
        assert wants_to_exit(text), text
    for text in ("7", "yes", "I stopped smoking, stopping for good", "unstoppable", "ทำต่อ"):
        assert not wants_to_exit(text), text
