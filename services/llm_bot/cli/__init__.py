"""The ``llm-bot`` command line: run, worker, gateway, inspect, demo, dev, ask, memory
show|why|forget|fact remove|fact correct|reindex|export|import, dlq list|replay, schemas,
fake-model.

Each command imports only what it runs: the parser (``parser.py``) is argparse alone, and a
command's modules are imported once it is parsed (``offline.py``: the commands that need no
settings; ``commands.py``: the others). Every child process (``run``, ``worker``,
``gateway``, a CLI command) thus pays for its own imports, not for every command's;
``tests/unit/test_cli_imports.py`` keeps it so.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from llm_bot.cli.parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if _offline(args):
        from llm_bot.cli.offline import run_offline

        return run_offline(args)
    from llm_bot.cli.commands import run_command

    return run_command(args)


def _offline(args: argparse.Namespace) -> bool:
    """``schemas``, ``fake-model``, ``gateway hash-key`` and ``inspect hash-key`` need no
    settings."""
    return args.command in ("schemas", "fake-model") or (
        args.command in ("gateway", "inspect")
        and getattr(args, f"{args.command}_command") == "hash-key"
    )
