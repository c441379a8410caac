"""docs/cli.md's table has a row for every command ``llm-bot`` parses."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from llm_bot.cli.parser import build_parser

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands(parser: argparse.ArgumentParser, path: str = "llm-bot") -> list[str]:
    """Every command line that runs something: a parser without a required subcommand."""
    found: list[str] = []
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not any(group.required for group in groups):
        found.append(path)
    for group in groups:
        for name, sub in group.choices.items():
            found += commands(sub, f"{path} {name}")
    return found


def documented() -> set[str]:
    """The commands named at the start of the first column of docs/cli.md's table rows."""
    rows = CLI_PAGE.read_text(encoding="utf-8").splitlines()
    return {
        match.group(1)
        for row in rows
        if (match := re.match(r"\| `(llm-bot(?: [a-z][a-z-]*)*)", row)) is not None
    }


def test_every_command_has_a_row_in_the_cli_page() -> None:
    """A command added to the parser without a row in docs/cli.md fails here."""
    listed = commands(build_parser())
    assert "llm-bot memory why" in listed
    missing = [command for command in listed if command not in documented()]
    assert missing == []
