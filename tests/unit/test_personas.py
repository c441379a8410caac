"""Personas from LLM_BOT_PERSONAS_PATH: loading, validation errors, choosing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_bot.config import ConfigurationError
from llm_bot.errors import InvalidEvent
from llm_bot.service.personas import load_personas, single_persona
from llm_bot.service.tool_catalog import ToolCatalog

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "services" / "llm_bot" / "examples" / "personas.yaml"
)
CONFIGURED_TOOLS = ToolCatalog(({"type": "function", "function": {"name": "configured"}},))


def _load(path: Path) -> object:
    return load_personas(path, system_prompt="service prompt", tools=CONFIGURED_TOOLS)


def test_the_example_file_loads_with_its_default_and_fallbacks() -> None:
    catalog = load_personas(EXAMPLE, system_prompt="service prompt", tools=CONFIGURED_TOOLS)
    assert catalog.default.name == "companion"
    assert catalog.default.system_prompt.startswith("You are a warm, patient companion.")
    assert catalog.default.retrieval
    assert catalog.default.tools == CONFIGURED_TOOLS  # unset: the service's tools
    assert catalog.default.model is None
    orders = catalog.choose("orders")
    assert not orders.retrieval
    assert [t["function"]["name"] for t in orders.tools.for_message(())] == ["lookup_order"]
    assert catalog.choose("default") is catalog.default  # the name always works
    checkin = catalog.choose("checkin")
    assert checkin.flow == "checkin"
    flow = catalog.flows["checkin"]
    assert [q.type for q in flow.questions] == ["scale", "boolean", "choice", "text"]


def test_json_files_and_a_persona_named_default(tmp_path: Path) -> None:
    path = tmp_path / "personas.json"
    path.write_text(
        json.dumps(
            {
                "personas": {
                    "default": {"model": "gpt-4.1-mini"},
                    "quiet": {"system_prompt": "", "retrieval": False},
                }
            }
        ),
        encoding="utf-8",
    )
    catalog = load_personas(path, system_prompt="service prompt", tools=ToolCatalog())
    assert (catalog.default.name, catalog.default.model) == ("default", "gpt-4.1-mini")
    assert catalog.default.system_prompt == "service prompt"
    assert catalog.choose("quiet").system_prompt == ""  # an empty prompt is a choice


def test_choosing_requested_remembered_and_default() -> None:
    catalog = load_personas(EXAMPLE, system_prompt="", tools=ToolCatalog())
    assert catalog.choose(None).name == "companion"
    assert catalog.choose(None, "orders").name == "orders"  # the conversation's persona
    assert catalog.choose("companion", "orders").name == "companion"  # asked wins
    assert catalog.choose(None, "removed-since").name == "companion"
    with pytest.raises(InvalidEvent, match=r"unknown persona 'pirate'") as unknown:
        catalog.choose("pirate")
    for existing in ("companion", "orders", "checkin"):  # the error lists nothing that exists
        assert existing not in str(unknown.value)


def test_without_a_file_one_default_persona_is_todays_behaviour() -> None:
    catalog = load_personas(None, system_prompt="be brief", tools=CONFIGURED_TOOLS)
    assert catalog == single_persona("be brief", CONFIGURED_TOOLS)
    assert catalog.choose(None).system_prompt == "be brief"
    assert catalog.choose(None).retrieval


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("personas: {}", "personas: "),
        ("personas:\n  a:\n    retrieval: maybe\n", "personas.a.retrieval: "),
        ("personas:\n  a:\n    colour: blue\n", "personas.a.colour: "),
        ("personas:\n  'bad name':\n    model: m\n", "personas.bad name"),
        ("default: b\npersonas:\n  a: {}\n", "default: 'b' is not one of the personas"),
        ("personas:\n  a:\n    tools: [{type: function}]\n", "personas.a.tools.0.function"),
        (
            "personas:\n  a:\n    tools:\n"
            "      - {type: function, function: {name: f}}\n"
            "      - {type: function, function: {name: f}}\n",
            "personas.a.tools: names must be unique",
        ),
        ("personas:\n  a:\n    flow: nowhere\n", "personas.a.flow: 'nowhere' is not one of"),
        (
            "default: a\npersonas:\n  a: {flow: f}\n"
            "flows:\n  f: {questions: [{id: q, type: text, text: Why}]}\n",
            "personas.a.flow: the default persona cannot run a flow",
        ),
        (
            "personas:\n  a: {flow: f}\nflows:\n  f: {questions: [{id: q, type: dice, text: x}]}\n",
            "flows.f.questions.0.type",
        ),
        ("personas: [unclosed", "not YAML"),
        ("- just\n- a list\n", "(the top level)"),
    ],
)
def test_bad_files_are_refused_naming_the_file_and_field(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = tmp_path / "personas.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigurationError) as refused:
        _load(path)
    message = str(refused.value)
    assert message.startswith(f"invalid configuration: LLM_BOT_PERSONAS_PATH: {path}: ")
    assert complaint in message


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read it"):
        _load(tmp_path / "absent.yaml")
