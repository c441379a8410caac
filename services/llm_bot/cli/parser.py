"""The ``llm-bot`` command line's parser: every command, option and help text, built with
argparse alone, so that ``--help``, a usage error and the choice of a command import nothing
of what the commands run (``llm_bot.cli.commands`` imports that, per command)."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_TENANT = "store_001"
DEFAULT_USER = "user123"
DEFAULT_CONVERSATION = "sess_1"
"""``llm-bot ask``'s ids when none is given (the README's first steps use them)."""

DLQ_QUEUES = ("events", "memory")
"""``llm-bot dlq --queue``: the service's DLQ and the memory worker's (``dlq_cli.QUEUES``)."""


def build_parser() -> argparse.ArgumentParser:
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
    ask.add_argument("--tenant", default=DEFAULT_TENANT)
    ask.add_argument("--user", default=DEFAULT_USER)
    ask.add_argument("--conversation", default=DEFAULT_CONVERSATION)
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
            choices=DLQ_QUEUES,
            default="events",
            help="events: the service's DLQ (default); memory: the memory worker's jobs DLQ",
        )
    replay.add_argument(
        "--limit", type=_positive_int, default=None, metavar="N", help="at most N (default all)"
    )
    replay.add_argument("--code", help="only this error code, e.g. model_error or broker:rejected")
