"""The commands that read the settings: load them, set up logging, run the command (its
modules imported when it runs) and turn a failure to reach RabbitMQ or Redis into one line."""

from __future__ import annotations

import argparse
import asyncio
import sys

from llm_bot.config import ConfigurationError, Settings, load_settings
from llm_bot.errors import DependencyUnavailable
from llm_bot.logs import configure_logging


def run_command(args: argparse.Namespace) -> int:
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
        from llm_bot.entrypoints.startup import describe_failure

        line = describe_failure(exc, broker=settings.broker, redis=settings.redis)
        if line is None and isinstance(exc, ConfigurationError | DependencyUnavailable):
            line = str(exc)
        if line is None:
            raise
        print(f"llm-bot: {line}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "run":
        from llm_bot.entrypoints.run import run_consumer

        asyncio.run(run_consumer(settings))
    elif args.command == "worker":
        from llm_bot.entrypoints.worker import run_worker

        asyncio.run(run_worker(settings))
    elif args.command == "gateway":
        from llm_bot.entrypoints.gateway import run_gateway

        asyncio.run(run_gateway(settings))
    elif args.command == "demo":
        from llm_bot.entrypoints.demo import run_demo

        asyncio.run(run_demo(settings))
    elif args.command == "dev":
        from llm_bot.entrypoints.dev import run_dev
        from llm_bot.inspector.access_keys import key_digest

        return asyncio.run(run_dev(settings, model_port=args.model_port, digest=key_digest))
    elif args.command == "ask":
        return _ask(args, settings)
    elif args.command == "dlq":
        return _dlq(args, settings)
    elif args.command == "memory":
        from llm_bot.cli.memory import run_memory

        return run_memory(args, settings)
    elif args.command == "inspect":
        from llm_bot.inspector.serve import run_inspector

        asyncio.run(run_inspector(settings))
    return 0


def _ask(args: argparse.Namespace, settings: Settings) -> int:
    from llm_bot.entrypoints.ask_cli import Question, run_ask

    question = Question(
        " ".join(args.text),
        tenant=args.tenant,
        user=args.user,
        conversation=args.conversation,
        stream=args.stream,
        as_json=args.json,
        timeout=args.timeout,
    )
    return asyncio.run(run_ask(settings.broker, question))


def _dlq(args: argparse.Namespace, settings: Settings) -> int:
    from llm_bot.entrypoints import dlq_cli

    if args.dlq_command == "list":
        return dlq_cli.run_list(
            settings.broker, limit=args.limit, as_json=args.json, queue=args.queue
        )
    return dlq_cli.run_replay(settings.broker, limit=args.limit, code=args.code, queue=args.queue)
