"""The commands that need no settings: ``schemas``, ``fake-model``, ``gateway hash-key`` and
``inspect hash-key``, each importing what it runs when it runs."""

from __future__ import annotations

import argparse
import re
import secrets
import sys


def run_offline(args: argparse.Namespace) -> int:
    if args.command == "fake-model":
        from llm_bot.fake_model import run_forever

        run_forever(
            args.host, args.port, args.latency, on_ready=print, stream_rate=args.stream_rate
        )
        return 0
    if args.command == "gateway":
        return _hash_key(args)
    if args.command == "inspect":
        return _inspector_hash_key(args)
    return _schemas(args)


def _schemas(args: argparse.Namespace) -> int:
    from llm_bot.contract.schema_export import stale_schemas, write_schemas

    if args.check:
        stale = stale_schemas(args.dir)
        for name in stale:
            print(f"stale: {args.dir / name} (run: make schemas)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas(args.dir):
        print(f"wrote {path}")
    return 0


def _hash_key(args: argparse.Namespace) -> int:
    from llm_bot.contract.identifiers import ID_PATTERN
    from llm_bot.gateway.api_keys import key_digest

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
    from llm_bot.contract.identifiers import ID_PATTERN
    from llm_bot.inspector.access_keys import key_digest

    if args.tenant is not None and re.fullmatch(ID_PATTERN, args.tenant) is None:
        print(f"llm-bot: --tenant: {args.tenant!r} is not a valid id", file=sys.stderr)
        return 2
    key = sys.stdin.readline().strip()
    if not key:
        print("llm-bot: inspect hash-key: give the key on stdin", file=sys.stderr)
        return 2
    print(f"{'*' if args.all else args.tenant}={key_digest(key)}")
    return 0
