"""The ``llm-bot`` command line: run, worker, gateway, inspect, demo, dev, ask, memory
show|why|forget|fact remove|fact correct|reindex|export|import, dlq list|replay, schemas,
fake-model."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import secrets
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.config import ConfigurationError, Settings, load_settings
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.contract.schema_export import stale_schemas, write_schemas
from llm_bot.entrypoints import ask_cli, dlq_cli, memory_cli, memory_transfer, recall_cli
from llm_bot.entrypoints.demo import run_demo
from llm_bot.entrypoints.dev import run_dev
from llm_bot.entrypoints.gateway import run_gateway
from llm_bot.entrypoints.run import run_consumer
from llm_bot.entrypoints.startup import describe_failure
from llm_bot.entrypoints.worker import run_worker
from llm_bot.errors import DependencyUnavailable
from llm_bot.fake_model import run_forever
from llm_bot.gateway.api_keys import key_digest
from llm_bot.inspector import fact_commands
from llm_bot.inspector import serve as inspector_serve
from llm_bot.inspector.access_keys import key_digest as inspector_key_digest
from llm_bot.inspector.serve import run_inspector
from llm_bot.inspector.why import render_why
from llm_bot.logs import configure_logging
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.fact_edits import FactEditRefused


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-bot",
        description="Event-driven chat bot with layered conversation memory. "
        "Configuration comes from the environment (see docs/configuration.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("run", help="consume InternalEventV2 events and publish candidates")
    commands.add_parser("worker", help="the memory worker: classify, compact, finalize")
    commands.add_parser("demo", help="a 7-turn conversation through RabbitMQ with a fake model")
    _add_ask(commands)
    _add_gateway(commands)
    _add_inspect(commands)
    _add_memory(commands)

    dlq = commands.add_parser("dlq", help="list or replay dead-lettered events")
    _add_dlq_actions(dlq)

    schemas = commands.add_parser("schemas", help="write the JSON Schemas into schemas/")
    schemas.add_argument("--dir", type=Path, default=Path("schemas"))
    schemas.add_argument("--check", action="store_true", help="fail if the files are stale")

    _add_fake_model(commands)
    return parser


def _add_gateway(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gateway = commands.add_parser(
        "gateway",
        help="serve the OpenAI-compatible HTTP API (POST /v1/chat/completions)",
        description="Without an ACTION: serve the OpenAI-compatible HTTP API on "
        "LLM_BOT_GATEWAY_PORT (8000) until SIGTERM/SIGINT, with /healthz, /readyz and /metrics "
        "on LLM_BOT_HTTP_PORT (9464); it needs LLM_BOT_GATEWAY_KEYS or "
        "LLM_BOT_GATEWAY_TOKEN_SECRETS. With an ACTION: that action only.",
    )
    gateway_commands = gateway.add_subparsers(dest="gateway_command", metavar="[ACTION]")
    hash_key = gateway_commands.add_parser(
        "hash-key", help="print the LLM_BOT_GATEWAY_KEYS entry for an API key (read on stdin)"
    )
    hash_key.add_argument("--tenant", required=True, help="the tenant the key acts for")
    hash_key.add_argument(
        "--user", help="bind the key to this one user (it may act as no other user)"
    )
    hash_key.add_argument(
        "--new", action="store_true", help="make a new random key (printed once) instead"
    )


def _add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = commands.add_parser(
        "inspect", help="serve the memory inspector in the browser (needs LLM_BOT_INSPECTOR_KEYS)"
    )
    inspect_commands = inspect.add_subparsers(dest="inspect_command", metavar="ACTION")
    inspect_key = inspect_commands.add_parser(
        "hash-key", help="print the LLM_BOT_INSPECTOR_KEYS entry for a key (read on stdin)"
    )
    scope = inspect_key.add_mutually_exclusive_group(required=True)
    scope.add_argument("--tenant", help="the one tenant the key may inspect")
    scope.add_argument("--all", action="store_true", help="the key may inspect every tenant")


def _add_memory(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = commands.add_parser("memory", help="inspect or erase memory")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    show = memory_commands.add_parser("show", help="show a conversation's memory")
    forget = memory_commands.add_parser("forget", help="erase a user's memory in a tenant")
    for sub in (show, forget):
        sub.add_argument("--tenant", required=True)
        sub.add_argument("--user", required=True)
    show.add_argument("--conversation", required=True)
    why = memory_commands.add_parser(
        "why", help="dry-run the prompt a message would get (sections, recalled items, scores)"
    )
    why.add_argument("--tenant", required=True)
    why.add_argument("--user", required=True)
    why.add_argument("--conversation", required=True)
    why.add_argument("--message", required=True, help="the message, as that user")
    why.add_argument("--at", help="ISO 8601 date and time of the message (default: now)")
    why.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.add_argument(
        "--query", metavar="TEXT", help="list what TEXT, sent now, would recall (retrieval)"
    )
    forget.add_argument("--conversation", default="*", help="one conversation (default: all)")
    _add_fact_actions(memory_commands)
    reindex = memory_commands.add_parser(
        "reindex", help="build the retrieval index for memory recorded before it existed"
    )
    reindex.add_argument("--tenant", help="only this tenant (default: every tenant)")
    reindex.add_argument("--user", help="only this user (needs --tenant)")
    reindex.add_argument(
        "--rebuild", action="store_true", help="drop and rebuild (after changing the model)"
    )
    _add_transfer_actions(memory_commands)


def _add_fake_model(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fake = commands.add_parser("fake-model", help="serve the fake OpenAI-compatible model")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=8089)
    fake.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    fake.add_argument(
        "--stream-rate",
        type=float,
        default=0.0,
        help="streamed text pieces (about tokens) per second (default 0: unpaced)",
    )


def _add_ask(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ask`` and ``dev``: the first hour's commands."""
    dev = commands.add_parser(
        "dev",
        help="the fake model, consumer, worker and inspector in one terminal (make dev)",
    )
    dev.add_argument("--model-port", type=int, default=8089, help="the fake model's port")
    ask = commands.add_parser(
        "ask",
        help="send a message to the running service and print its reply",
        description="Publish TEXT as a message event (llm_bot.client) to the running service "
        "and print the reply; AMQP_URL and LLM_BOT_INGRESS_* say where.",
    )
    ask.add_argument("text", nargs="+", metavar="TEXT", help="the message")
    ask.add_argument("--tenant", default=ask_cli.DEFAULT_TENANT)
    ask.add_argument("--user", default=ask_cli.DEFAULT_USER)
    ask.add_argument("--conversation", default=ask_cli.DEFAULT_CONVERSATION)
    shown = ask.add_mutually_exclusive_group()
    shown.add_argument(
        "--stream", action="store_true", help="print the reply's pieces as they arrive"
    )
    shown.add_argument("--json", action="store_true", help="print the CandidateV1 as JSON")
    ask.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait (default 120)"
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_transfer_actions(
    memory_commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    export = memory_commands.add_parser(
        "export", help="write a user's or a tenant's memory as JSON Lines (one user a line)"
    )
    export.add_argument("--tenant", required=True)
    export.add_argument("--user", help="only this user (default: every user of the tenant)")
    export.add_argument(
        "--output", "-o", type=Path, help="write to this file (default: standard output)"
    )
    imported = memory_commands.add_parser(
        "import", help="put back memory written by memory export (re-embeds the index)"
    )
    imported.add_argument("file", type=Path, help="the JSON Lines file ('-': standard input)")
    imported.add_argument("--tenant", required=True, help="the tenant to import into")
    imported.add_argument(
        "--from-tenant",
        help="accept lines of this other tenant (its users move into --tenant)",
    )


def _add_fact_actions(memory_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fact = memory_commands.add_parser(
        "fact", help="remove or correct one fact of a user (the inspector's fact actions)"
    )
    actions = fact.add_subparsers(dest="fact_command", required=True, metavar="ACTION")
    remove = actions.add_parser(
        "remove", help="remove a current fact (what it had replaced is current again)"
    )
    correct = actions.add_parser(
        "correct", help="supersede a current fact by a new value (provenance operator)"
    )
    for action in (remove, correct):
        action.add_argument("--tenant", required=True)
        action.add_argument("--user", required=True)
        action.add_argument(
            "--fact", required=True, metavar="ID", help="the fact's id (memory show --json)"
        )
    correct.add_argument("--value", required=True, metavar="TEXT", help="the new value")
    for action in (remove, correct):
        action.add_argument(
            "--yes",
            action="store_true",
            help="do it (without: print what would go or change, and change nothing)",
        )


def _add_dlq_actions(dlq: argparse.ArgumentParser) -> None:
    actions = dlq.add_subparsers(dest="dlq_command", required=True, metavar="ACTION")
    show = actions.add_parser("list", help="show dead letters (non-destructive: nothing removed)")
    show.add_argument(
        "--limit", type=_positive_int, default=100, metavar="N", help="at most N (default 100)"
    )
    show.add_argument("--json", action="store_true", help="one JSON object per line")
    replay = actions.add_parser("replay", help="move dead letters back to where they came from")
    for action in (show, replay):
        action.add_argument(
            "--queue",
            choices=dlq_cli.QUEUES,
            default="events",
            help="events: the service's DLQ (default); memory: the memory worker's jobs DLQ",
        )
    replay.add_argument(
        "--limit", type=_positive_int, default=None, metavar="N", help="at most N (default all)"
    )
    replay.add_argument("--code", help="only this error code, e.g. model_error or broker:rejected")


def _dlq(args: argparse.Namespace, settings: Settings) -> int:
    if args.dlq_command == "list":
        return dlq_cli.run_list(
            settings.broker, limit=args.limit, as_json=args.json, queue=args.queue
        )
    return dlq_cli.run_replay(settings.broker, limit=args.limit, code=args.code, queue=args.queue)


def _key(args: argparse.Namespace) -> ConversationKey:
    key = ConversationKey(args.tenant, args.user, args.conversation)
    try:
        RedisKeys().working_memory(key)  # validates the ids before any key is used
    except ValueError as exc:
        raise ConfigurationError(f"--tenant/--user/--conversation: {exc}") from exc
    return key


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "run":
        asyncio.run(run_consumer(settings))
    elif args.command == "worker":
        asyncio.run(run_worker(settings))
    elif args.command == "gateway":
        asyncio.run(run_gateway(settings))
    elif args.command == "demo":
        asyncio.run(run_demo(settings))
    elif args.command == "dev":
        return asyncio.run(
            run_dev(settings, model_port=args.model_port, digest=inspector_key_digest)
        )
    elif args.command == "ask":
        question = ask_cli.Question(
            " ".join(args.text),
            tenant=args.tenant,
            user=args.user,
            conversation=args.conversation,
            stream=args.stream,
            as_json=args.json,
            timeout=args.timeout,
        )
        return asyncio.run(ask_cli.run_ask(settings.broker, question))
    elif args.command == "dlq":
        return _dlq(args, settings)
    elif args.command == "memory":
        return _memory(args, settings)
    elif args.command == "inspect":
        asyncio.run(run_inspector(settings))
    return 0


def _memory(args: argparse.Namespace, settings: Settings) -> int:
    if args.memory_command == "show" and args.query is not None:
        hits = asyncio.run(recall_cli.show_recall(settings, _key(args), args.query))
        print(
            json.dumps(hits, indent=2, ensure_ascii=False)
            if args.json
            else recall_cli.render_recall(hits)
        )
    elif args.memory_command == "show":
        data = asyncio.run(memory_cli.show_memory(settings, _key(args)))
        text = json.dumps(data, indent=2, ensure_ascii=False) if args.json else None
        print(text or memory_cli.render_memory(data))
    elif args.memory_command == "why":
        at = datetime.fromisoformat(args.at) if args.at else datetime.now(UTC)
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        data = asyncio.run(inspector_serve.why(settings, _key(args), args.message, at))
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else render_why(data))
    elif args.memory_command == "fact":
        return _fact(args, settings)
    elif args.memory_command in ("export", "import"):
        return _transfer(args, settings)
    elif args.memory_command == "reindex":
        if args.user and not args.tenant:
            raise ConfigurationError("memory reindex: --user needs --tenant")
        written = asyncio.run(
            recall_cli.reindex(
                settings, tenant_id=args.tenant, user_id=args.user, rebuild=args.rebuild
            )
        )
        print(f"wrote {written} index entries")
    else:
        if args.conversation != "*":
            _key(args)
        deleted = asyncio.run(
            memory_cli.forget_memory(settings, args.tenant, args.user, args.conversation)
        )
        print(f"erased {deleted} keys")
    return 0


def _transfer(args: argparse.Namespace, settings: Settings) -> int:
    """``memory export`` (0; 1 when ``--user`` was left out: being erased) and ``memory
    import`` (0; 1 when a user was refused)."""

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


def _offline_command(args: argparse.Namespace) -> int:
    """Commands that need no settings: ``schemas``, ``fake-model``, ``gateway hash-key``."""
    if args.command == "fake-model":
        run_forever(
            args.host, args.port, args.latency, on_ready=print, stream_rate=args.stream_rate
        )
        return 0
    if args.command == "gateway":
        return _hash_key(args)
    if args.command == "inspect":
        return _inspector_hash_key(args)
    if args.check:
        stale = stale_schemas(args.dir)
        for name in stale:
            print(f"stale: {args.dir / name} (run: make schemas)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas(args.dir):
        print(f"wrote {path}")
    return 0


def _hash_key(args: argparse.Namespace) -> int:
    for option, value in (("--tenant", args.tenant), ("--user", args.user)):
        if value is not None and re.fullmatch(ID_PATTERN, value) is None:
            print(f"llm-bot: {option}: {value!r} is not a valid id", file=sys.stderr)
            return 2
    if args.new:
        key = "sk-llmbot-" + secrets.token_urlsafe(32)
        print(f"API key (give it to the client; it is not stored): {key}", file=sys.stderr)
    else:
        key = sys.stdin.readline().strip()
        if not key:
            print(
                "llm-bot: gateway hash-key: give the key on stdin (or use --new)", file=sys.stderr
            )
            return 2
    holder = args.tenant if args.user is None else f"{args.tenant}/{args.user}"
    print(f"{holder}={key_digest(key)}")
    return 0


def _inspector_hash_key(args: argparse.Namespace) -> int:
    if args.tenant is not None and re.fullmatch(ID_PATTERN, args.tenant) is None:
        print(f"llm-bot: --tenant: {args.tenant!r} is not a valid id", file=sys.stderr)
        return 2
    key = sys.stdin.readline().strip()
    if not key:
        print("llm-bot: inspect hash-key: give the key on stdin", file=sys.stderr)
        return 2
    print(f"{'*' if args.all else args.tenant}={inspector_key_digest(key)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("schemas", "fake-model") or (
        args.command in ("gateway", "inspect")
        and getattr(args, f"{args.command}_command") == "hash-key"
    ):
        return _offline_command(args)
    try:
        settings = load_settings()
    except ConfigurationError as exc:
        print(f"llm-bot: {exc}", file=sys.stderr)
        return 2
    configure_logging(level=settings.logging.level, fmt=settings.logging.format)
    try:
        return _dispatch(args, settings)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        line = describe_failure(exc, broker=settings.broker, redis=settings.redis)
        if line is None and isinstance(exc, ConfigurationError | DependencyUnavailable):
            line = str(exc)
        if line is None:
            raise
        print(f"llm-bot: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
