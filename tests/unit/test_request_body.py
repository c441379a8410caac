"""The gateway's nesting check, done before parsing (``gateway/request_body.py``)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from llm_bot.gateway.request_body import nesting


def test_brackets_inside_strings_do_not_count() -> None:
    assert nesting(b'{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert nesting(b'{"s": "\\"[[[["}') == 1
    assert nesting(b'"just a string [["') == 0
    assert nesting(b"42") == 0


def test_deep_and_wide_bodies() -> None:
    assert nesting(b"[" * 100_000 + b"]" * 100_000) == 100_000
    assert nesting(b"[" + b"[]," * 80_000 + b"[]]") == 2


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    return 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda children: st.lists(children) | st.dictionaries(st.text(alphabet='[]{}"ab'), children),
    max_leaves=30,
)


@given(JSON)
def test_the_nesting_of_any_json_text_is_its_values_depth(value: object) -> None:
    assert nesting(json.dumps(value).encode()) == _depth(value)
