"""Every CLI command, with RabbitMQ or Redis down or misconfigured: one line on stderr that
names the variable to fix, exit code 2, no traceback, no library log line before it."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Iterator

import pytest

from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL

# 22 processes, each importing llm-bot (seconds of CPU apiece; two wait out the 15 s connect
# timeout): on a loaded 2-core machine, beside make test's other workers, over the default 120 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

SHOW = ["memory", "show", "--tenant", "t", "--user", "u", "--conversation", "c"]
FORGET = ["memory", "forget", "--tenant", "t", "--user", "u"]


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (not RabbitMQ)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cases(silent: int) -> list[tuple[list[str], dict[str, str], tuple[str, ...]]]:
    closed = _closed_port()
    amqp = os.environ.get("AMQP_URL", DEFAULT_AMQP_URL)
    host = amqp.split("@")[-1].split("/")[0]
    rabbit_down = {"AMQP_URL": f"amqp://guest:guest@127.0.0.1:{closed}/"}
    redis_down = {"REDIS_URL": f"redis://127.0.0.1:{closed}/0"}
    wrong_password = {"AMQP_URL": f"amqp://guest:not-the-password@{host}/"}
    no_vhost = {"AMQP_URL": f"amqp://guest:guest@{host}/no-such-vhost"}
    not_rabbit = {"AMQP_URL": f"amqp://guest:guest@127.0.0.1:{silent}/"}
    cases: list[tuple[list[str], dict[str, str], tuple[str, ...]]] = []
    for command in (["run"], ["dlq", "list"]):  # first: they wait out the connect timeout
        cases.append((command, not_rabbit, ("answered as RabbitMQ", "AMQP_URL")))
    for command in (["run"], ["worker"], ["demo"], ["dlq", "list"], ["dlq", "replay"]):
        cases.append((command, rabbit_down, ("not reachable", "AMQP_URL")))
    for command in (["run"], ["dlq", "list"]):
        cases.append((command, wrong_password, ("user or password", "AMQP_URL")))
        cases.append((command, no_vhost, ("virtual host", "AMQP_URL")))
    for command in (["run"], ["worker"], ["demo"], SHOW, FORGET, ["memory", "reindex"]):
        cases.append((command, redis_down, ("not reachable", "REDIS_URL")))
    cases.append(([*SHOW, "--query", "hi"], redis_down, ("not reachable", "REDIS_URL")))
    cases.append((["dlq", "list"], {"AMQP_URL": "localhost:5672"}, ("AMQP_URL", "amqp://")))
    cases.append((SHOW, {"REDIS_URL": "localhost"}, ("REDIS_URL", "redis://")))
    return cases


async def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llm_bot",
        *argv,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 180)
    return process.returncode or 0, stderr.decode()


async def test_every_command_reports_an_unusable_dependency_in_one_line(
    silent_port: int,
) -> None:
    base = dict(
        os.environ,
        AMQP_URL=os.environ.get("AMQP_URL", DEFAULT_AMQP_URL),
        REDIS_URL=os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="x",
        LLM_BOT_HTTP_PORT="0",
    )
    cases = _cases(silent_port)
    limit = asyncio.Semaphore(4)

    async def one(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
        async with limit:
            return await _run(argv, {**base, **env})

    results = await asyncio.gather(*(one(argv, env) for argv, env, _ in cases))
    for (argv, env, expected), (code, stderr) in zip(cases, results, strict=True):
        where = f"llm-bot {' '.join(argv)} with {env}: {stderr!r}"
        lines = stderr.strip().splitlines()
        assert code == 2, where
        assert len(lines) == 1, where
        assert lines[0].startswith("llm-bot: "), where
        for word in expected:
            assert word in lines[0], where
        assert "guest:" not in lines[0], where  # credentials never printed
