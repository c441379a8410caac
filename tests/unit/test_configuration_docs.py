"""docs/configuration.md's table of environment variables names every variable ``Settings``
reads, each in the first column of a row."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices

from llm_bot.config import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SECTION = "\n## Environment variables\n"


def environment_variables() -> list[str]:
    names = []
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.append(str(alias.choices[0]))
    return names


def environment_section() -> str:
    text = CONFIGURATION.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def documented_variables() -> set[str]:
    """The `NAME`s in the first column of the section's table rows."""
    names: set[str] = set()
    for line in environment_section().splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split(" | ")[0]))
    return names


def test_every_setting_is_in_the_configuration_table() -> None:
    """Each Settings alias is a row of docs/configuration.md's "Environment variables"."""
    names = environment_variables()
    assert "LLM_BOT_INSPECTOR_KEYS" in names
    documented = documented_variables()
    missing = [name for name in names if name not in documented]
    assert missing == []


def test_the_readme_links_to_the_configuration_table() -> None:
    """Users find the variables from the README."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/configuration.md" in readme
