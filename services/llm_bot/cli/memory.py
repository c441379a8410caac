"""``llm-bot memory show|why|forget|fact remove|fact correct|reindex|export|import``, each
importing what it runs when it runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from llm_bot.config import ConfigurationError, Settings

if TYPE_CHECKING:
    from llm_bot.memory.conversation_key import ConversationKey


def run_memory(args: argparse.Namespace, settings: Settings) -> int:
    if args.memory_command == "show" and args.query is not None:
        from llm_bot.entrypoints import recall_cli

        hits = asyncio.run(recall_cli.show_recall(settings, _key(args), args.query))
        print(
            json.dumps(hits, indent=2, ensure_ascii=False)
            if args.json
            else recall_cli.render_recall(hits)
        )
    elif args.memory_command == "show":
        from llm_bot.entrypoints import memory_cli

        data = asyncio.run(memory_cli.show_memory(settings, _key(args)))
        text = json.dumps(data, indent=2, ensure_ascii=False) if args.json else None
        print(text or memory_cli.render_memory(data))
    elif args.memory_command == "why":
        _why(args, settings)
    elif args.memory_command == "fact":
        return _fact(args, settings)
    elif args.memory_command in ("export", "import"):
        return _transfer(args, settings)
    elif args.memory_command == "reindex":
        _reindex(args, settings)
    else:
        _forget(args, settings)
    return 0


def _key(args: argparse.Namespace) -> ConversationKey:
    from llm_bot.adapters.redis_keys import RedisKeys
    from llm_bot.memory.conversation_key import ConversationKey

    key = ConversationKey(args.tenant, args.user, args.conversation)
    try:
        RedisKeys().working_memory(key)  # validates the ids before any key is used
    except ValueError as exc:
        raise ConfigurationError(f"--tenant/--user/--conversation: {exc}") from exc
    return key


def _why(args: argparse.Namespace, settings: Settings) -> None:
    from llm_bot.inspector import serve
    from llm_bot.inspector.why import render_why

    at = datetime.fromisoformat(args.at) if args.at else datetime.now(UTC)
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    data = asyncio.run(serve.why(settings, _key(args), args.message, at))
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else render_why(data))


def _reindex(args: argparse.Namespace, settings: Settings) -> None:
    if args.user and not args.tenant:
        raise ConfigurationError("memory reindex: --user needs --tenant")
    from llm_bot.entrypoints import recall_cli

    written = asyncio.run(
        recall_cli.reindex(settings, tenant_id=args.tenant, user_id=args.user, rebuild=args.rebuild)
    )
    print(f"wrote {written} index entries")


def _forget(args: argparse.Namespace, settings: Settings) -> None:
    if args.conversation != "*":
        _key(args)
    from llm_bot.entrypoints import memory_cli

    deleted = asyncio.run(
        memory_cli.forget_memory(settings, args.tenant, args.user, args.conversation)
    )
    print(f"erased {deleted} keys")


def _transfer(args: argparse.Namespace, settings: Settings) -> int:
    """``memory export`` (0; 1 when ``--user`` was left out: being erased) and ``memory
    import`` (0; 1 when a user was refused)."""
    from llm_bot.entrypoints import memory_transfer

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.memory_command == "export":
        with contextlib.ExitStack() as stack:
            out = (
                stack.enter_context(args.output.open("w", encoding="utf-8"))
                if args.output is not None
                else sys.stdout
            )
            written = asyncio.run(
                memory_transfer.export_memory(
                    settings, args.tenant, args.user, out, progress=progress
                )
            )
        return 1 if args.user is not None and written == 0 else 0
    with contextlib.ExitStack() as stack:
        lines = (
            sys.stdin
            if str(args.file) == "-"
            else stack.enter_context(args.file.open(encoding="utf-8"))
        )
        result = asyncio.run(
            memory_transfer.import_memory(
                settings,
                lines,
                tenant_id=args.tenant,
                from_tenant=args.from_tenant,
                progress=progress,
            )
        )
    print(
        f"imported {result.imported} users ({result.index_entries} index entries re-embedded)"
        + (f"; refused {result.refused} (erasure in progress)" if result.refused else "")
    )
    return 1 if result.refused else 0


def _fact(args: argparse.Namespace, settings: Settings) -> int:
    """``memory fact remove|correct``: 0 done; 1 nothing changed (not confirmed with
    ``--yes``, or refused: unknown user, not a current fact, a value refused)."""
    from llm_bot.contract.identifiers import ID_PATTERN
    from llm_bot.inspector import fact_commands
    from llm_bot.memory.fact_edits import FactEditRefused

    for option, value in (("--tenant", args.tenant), ("--user", args.user), ("--fact", args.fact)):
        if re.fullmatch(ID_PATTERN, value) is None:
            raise ConfigurationError(f"{option}: {value!r} is not a valid id")
    ids = (settings, args.tenant, args.user, args.fact)
    try:
        if args.fact_command == "remove":
            edit = asyncio.run(fact_commands.remove_fact(*ids, confirmed=args.yes))
        else:
            edit = asyncio.run(fact_commands.correct_fact(*ids, args.value, confirmed=args.yes))
    except FactEditRefused as exc:
        print(f"llm-bot: memory fact {args.fact_command}: {exc}", file=sys.stderr)
        return 1
    print("\n".join(edit.lines))
    if not edit.done:
        print(f"nothing changed: add --yes to {args.fact_command} it", file=sys.stderr)
    return 0 if edit.done else 1
