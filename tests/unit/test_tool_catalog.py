"""The tools file (``LLM_BOT_TOOLS_PATH``) and which tools a message offers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_bot.config import ConfigurationError
from llm_bot.service.tool_catalog import ToolCatalog, load_tool_catalog

LOOKUP = {
    "type": "function",
    "function": {"name": "lookup_order", "parameters": {"type": "object"}},
}


def test_the_event_s_tools_win_over_the_configured_ones(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([LOOKUP]), encoding="utf-8")
    catalog = load_tool_catalog(path)
    assert catalog.for_message(()) == (LOOKUP,)
    own = ({"type": "function", "function": {"name": "other"}},)
    assert catalog.for_message(own) == own
    assert load_tool_catalog(None) == ToolCatalog()
    assert ToolCatalog().for_message(()) == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        (json.dumps({"tools": []}), "(the top level): Input should be a valid list"),
        (json.dumps([{"type": "function", "function": {"name": "bad name"}}]), "0.function.name"),
        (json.dumps([LOOKUP, LOOKUP]), "function names must be unique"),
        (
            json.dumps([{"type": "function", "function": {"name": f"f{n}"}} for n in range(65)]),
            "65 tools, at most 64",
        ),
    ],
)
def test_a_bad_tools_file_is_one_line_naming_the_file_and_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_tool_catalog(path)
    text = str(caught.value)
    assert text.startswith(f"invalid configuration: LLM_BOT_TOOLS_PATH: {path}")
    assert message in text
    assert "\n" not in text


def test_a_missing_tools_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read it"):
        load_tool_catalog(tmp_path / "absent.json")
