"""``llm-bot`` imports a command's modules only when that command runs: the parser is argparse
alone, so ``--help``, a usage error or ``ask`` do not pay for the service's imports (seconds
of CPU in every child process, ``llm_bot/cli/__init__.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

from llm_bot.cli.parser import DLQ_QUEUES, build_parser
from llm_bot.entrypoints.dlq_cli import QUEUES
from tests.unit.test_cli_docs import commands

SERVICE_ONLY = (
    "langgraph",
    "langchain_core",
    "openai",
    "numpy",
    "redis",
    "fastapi",
    "uvicorn",
    "jinja2",
    "aiohttp",
    "prometheus_client",
    "tiktoken",
    "snowballstemmer",
)
"""Libraries of the consumer, worker, gateway and inspector, none of which ``ask`` needs."""

PARSING = """
import contextlib, io, json, sys
from llm_bot.cli import main
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
print(json.dumps(sorted(sys.modules)))
"""

RUNNING = """
import asyncio, json, sys
def not_run(coroutine):
    coroutine.close()
    return 0
asyncio.run = not_run
from llm_bot.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]))
"""


def _probe(*args: str) -> object:
    """Run a probe in a fresh interpreter, with no ``LLM_BOT_*`` or model variable set."""
    probe = subprocess.run(  # noqa: S603  # this interpreter on this module's probe
        [sys.executable, "-c", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert probe.returncode == 0, probe.stderr
    return json.loads(probe.stdout)


def _roots(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_help_and_usage_errors_import_the_parser_only() -> None:
    """``--help`` of every command, and a bad option, load ``llm_bot.cli`` and its parser and
    no other module of llm-bot, nor pydantic or any library of the service."""
    every_help = [[*line.split()[1:], "--help"] for line in commands(build_parser())]
    assert ["run", "--help"] in every_help
    argvs = [["--help"], *every_help, ["dlq", "list", "--limit", "0"], ["no-such-command"]]
    modules = _probe(PARSING, json.dumps(argvs))
    assert isinstance(modules, list)
    assert {m for m in modules if m.startswith("llm_bot")} == {
        "llm_bot",
        "llm_bot.cli",
        "llm_bot.cli.parser",
    }
    assert _roots(modules) & {*SERVICE_ONLY, "pydantic", "structlog", "aio_pika"} == set()


def test_ask_imports_the_client_and_not_the_service() -> None:
    """``llm-bot ask`` loads the settings, logging and the client, not the consumer's graph,
    model SDK, Redis, or the gateway's and inspector's web stack."""
    result = _probe(RUNNING, "ask", "hi")
    assert isinstance(result, list)
    code, modules = result
    assert code == 0
    assert "llm_bot.entrypoints.ask_cli" in modules
    assert _roots(modules) & set(SERVICE_ONLY) == set()
    service = ("llm_bot.bootstrap", "llm_bot.service", "llm_bot.graph", "llm_bot.memory")
    assert [m for m in modules if m.startswith(service)] == []


def test_the_parser_offers_the_queues_dlq_cli_knows() -> None:
    """``dlq --queue``'s choices, written in the parser to keep it import-free, are the
    queues ``dlq_cli`` serves."""
    assert DLQ_QUEUES == QUEUES
