"""README's Configuration table names every environment variable ``Settings`` reads."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices

from llm_bot.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def environment_variables() -> list[str]:
    names = []
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.append(str(alias.choices[0]))
    return names


def configuration_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Configuration\n")
    return text[start : text.index("\n## ", start + 1)]


def test_every_setting_is_in_the_readme_configuration_table() -> None:
    """Each Settings alias is named (as `NAME`) in README's Configuration section."""
    section = configuration_section()
    names = environment_variables()
    assert "LLM_BOT_INSPECTOR_KEYS" in names
    missing = [name for name in names if f"`{name}`" not in section]
    assert missing == []
