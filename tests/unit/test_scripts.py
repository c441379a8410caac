"""Which script a text is written in: what the English model reads, and a conversation
that mixes scripts."""

from __future__ import annotations

import pytest

from llm_bot.memory.scripts import mixes_scripts, mostly_latin


@pytest.mark.parametrize(
    ("text", "latin"),
    [
        ("Hello there", True),
        ("Crème brûlée, s'il vous plaît", True),
        ("4471", True),
        ("ราคาสินค้านี้เท่าไหร่ครับ", False),
        ("ราคา of the blue kettle please", True),
        ("ฉันชอบ iPhone มาก", False),
        ("Привет, как дела?", False),
        ("   ", False),
    ],
)
def test_mostly_latin(text: str, latin: bool) -> None:
    assert mostly_latin(text) is latin


def test_a_conversation_mixes_scripts_when_one_of_its_texts_is_of_another() -> None:
    thai = ["สวัสดีค่ะ ฉันชื่อแอน", "echo: สวัสดีค่ะ"]
    assert mixes_scripts("What is my name?", thai)
    assert mixes_scripts("ฉันชื่ออะไร", ["Hello, I am Ann.", "ok"])
    assert not mixes_scripts("What is my name?", ["Hello, I am Ann.", "4471", "👍", ""])
    assert not mixes_scripts("ฉันชื่ออะไร", thai)
    assert not mixes_scripts("What is my name?", [])
