"""The inspector's visible-character filter (``inspector/rendering.py``): control and
format characters (bidi overrides, isolates, zero-width marks) show as ``⟨U+XXXX⟩``;
everything else, newlines and tabs included, renders unchanged and escaped."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_bot.inspector.rendering import environment, visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\u202egnp.exe", "⟨U+202E⟩gnp.exe"),  # right-to-left override
        ("a\u2066b\u2069c", "a⟨U+2066⟩b⟨U+2069⟩c"),  # isolates
        ("zero\u200bwidth", "zero⟨U+200B⟩width"),  # zero-width space (format)
        ("bell\x07", "bell⟨U+0007⟩"),
        ("esc\x1b[31m", "esc⟨U+001B⟩[31m"),  # a terminal escape
        ("line\nnext\ttab", "line\nnext\ttab"),
        ("ราคาสินค้านี้เท่าไหร่ครับ", "ราคาสินค้านี้เท่าไหร่ครับ"),  # Thai marks are not controls
        ("emoji 👍🏽", "emoji 👍🏽"),
    ],
)
def test_controls_become_visible_marks_and_text_stays(text: str, shown: str) -> None:
    """Each control or format character is replaced by its mark; the rest is untouched."""
    assert visible(text) == shown


def test_non_strings_pass_and_none_is_empty() -> None:
    """Numbers render as themselves; None renders as nothing."""
    assert visible(3) == 3
    assert visible(0.5) == 0.5
    assert visible(None) == ""


@given(st.text())
def test_no_control_or_format_character_survives(text: str) -> None:
    """Whatever the text, the output holds no Cc/Cf/Cs/Co/Cn character but newline and tab."""
    assert all(unicodedata.category(c)[0] != "C" or c in "\n\t" for c in visible(text))


def test_templates_escape_markup_and_mark_controls() -> None:
    """Through the environment, markup is escaped and a bidi override is marked."""
    template = environment().from_string("<p>{{ value }}</p>")
    html = template.render(value='<script>x()</script> \u202e"')
    assert html == "<p>&lt;script&gt;x()&lt;/script&gt; ⟨U+202E⟩&#34;</p>"
