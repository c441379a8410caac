"""``llm-bot dev`` (``make dev``): the fake model, the consumer, the memory worker and the
inspector in one terminal, each a child process whose lines are prefixed with its name;
one Ctrl-C (or SIGTERM) stops them all, and one that exits stops the others.

It is the first hour's setup, not production's: the model is the project's fake one, the
worker's probe port is the consumer's plus one, and when ``LLM_BOT_INSPECTOR_KEYS`` is
unset the inspector gets a key made for this session, printed with a URL that logs in (the
key rides in the URL's fragment, which the browser never sends: ``static/login.js`` puts
it in the login form).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm_bot.config import Settings

CHILDREN = ("model", "run", "worker", "inspect")
READY_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class DevPlan:
    """Ports and the environment of the children, from the launcher's own environment."""

    model_port: int
    run_port: int
    worker_port: int
    inspector_host: str
    inspector_port: int
    inspector_key: str | None
    """The session's key (None: ``LLM_BOT_INSPECTOR_KEYS`` was set, log in with yours)."""
    env: dict[str, str] = field(repr=False)

    @classmethod
    def of(cls, settings: Settings, model_port: int, digest: Callable[[str], str]) -> DevPlan:
        """``digest``: the inspector's key digest (``LLM_BOT_INSPECTOR_KEYS``'s form)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.setdefault("LLM_BOT_LOG_FORMAT", "console")
        env.update(
            OPENAI_BASE_URL=f"http://127.0.0.1:{model_port}/v1",
            OPENAI_MODEL="fake-model",
            PYTHONUNBUFFERED="1",
        )
        key = None
        if not settings.inspector.keys.strip():
            key = secrets.token_urlsafe(24)
            env["LLM_BOT_INSPECTOR_KEYS"] = f"*={digest(key)}"
        return cls(
            model_port=model_port,
            run_port=settings.http_port,
            worker_port=settings.http_port + 1,
            inspector_host=settings.inspector.host,
            inspector_port=settings.inspector.port,
            inspector_key=key,
            env=env,
        )

    def command(self, name: str) -> tuple[list[str], dict[str, str]]:
        """The child's argv and environment."""
        env = dict(self.env)
        argv = [sys.executable, "-m", "llm_bot"]
        if name == "model":
            return [*argv, "fake-model", "--port", str(self.model_port)], env
        port = {"run": self.run_port, "worker": self.worker_port}.get(name)
        if port is not None:
            env["LLM_BOT_HTTP_PORT"] = str(port)
        return [*argv, name], env

    def login_url(self) -> str:
        host = "127.0.0.1" if self.inspector_host in ("0.0.0.0", "") else self.inspector_host  # noqa: S104
        url = f"http://{host}:{self.inspector_port}/login"
        return f"{url}#key={self.inspector_key}" if self.inspector_key else url


def banner(plan: DevPlan) -> str:
    """What to do next, printed once every child is ready."""
    cli = _cli_path()
    login = (
        f"  inspector: {plan.login_url()}\n"
        f"             (or log in at that address without '#...' with the key {plan.inspector_key};\n"
        "              it lasts this session; set LLM_BOT_INSPECTOR_KEYS for a key of your own)\n"
        if plan.inspector_key
        else f"  inspector: {plan.login_url()} (log in with your LLM_BOT_INSPECTOR_KEYS key)\n"
    )
    return (
        "\nllm-bot dev: ready (fake model, consumer, memory worker, inspector). "
        "In a second terminal:\n"
        f'  ask:       {cli} ask "How much is the blue kettle?"\n'
        f"  memory:    {cli} memory show --tenant store_001 --user user123 --conversation sess_1\n"
        f"{login}"
        "Ctrl-C stops them all.\n"
    )


def _cli_path() -> str:
    cli = Path(sys.executable).parent / "llm-bot"
    with contextlib.suppress(ValueError):
        return str(cli.relative_to(Path.cwd()))
    return str(cli)


class Launcher:
    """The children, their prefixed output, and stopping them together."""

    def __init__(self, plan: DevPlan) -> None:
        self._plan = plan
        self._children: dict[str, asyncio.subprocess.Process] = {}
        self._pumps: list[asyncio.Task[None]] = []

    async def run(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            for name in CHILDREN:
                await self._start(name)
            exited = asyncio.ensure_future(self._first_exit())
            ready = asyncio.ensure_future(self._ready())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({exited, ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if ready.done() and ready.exception() is None and not exited.done():
                _say(banner(self._plan))
                await asyncio.wait({exited, stopped}, return_when=asyncio.FIRST_COMPLETED)
            for task in (exited, ready, stopped):
                task.cancel()
            code = 0
            if exited.done() and not exited.cancelled():
                name, code = exited.result()
                _say(f"llm-bot dev: {name} exited ({code}); stopping the others")
                code = code or 1
            elif ready.done() and not ready.cancelled() and ready.exception() is not None:
                _say(f"llm-bot dev: {ready.exception()}; stopping")
                code = 1
            return code
        finally:
            await self._stop_all()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    async def _start(self, name: str) -> None:
        argv, env = self._plan.command(name)
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the launcher only: it stops them in order
        )
        self._children[name] = process
        assert process.stdout is not None  # noqa: S101  # piped above
        self._pumps.append(asyncio.create_task(_pump(name, process.stdout)))

    async def _first_exit(self) -> tuple[str, int]:
        waits = {
            asyncio.ensure_future(process.wait()): name for name, process in self._children.items()
        }
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        first = done.pop()
        return waits[first], first.result()

    async def _ready(self) -> None:
        """Every child answers: the model's port, the consumer's and the worker's
        ``/readyz``, the inspector's login page."""
        plan = self._plan
        host = plan.login_url().split("/login")[0]
        urls = [
            f"http://127.0.0.1:{plan.model_port}/v1/models",
            f"http://127.0.0.1:{plan.run_port}/readyz",
            f"http://127.0.0.1:{plan.worker_port}/readyz",
            f"{host}/login",
        ]
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                await asyncio.gather(*(_until_ok(url) for url in urls))
        except TimeoutError:
            raise RuntimeError(f"not ready after {READY_TIMEOUT_SECONDS:g} s") from None

    async def _stop_all(self) -> None:
        """SIGTERM to each child (they drain), SIGKILL to one still there after the grace."""
        for process in self._children.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
        for name, process in self._children.items():
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
            except TimeoutError:
                _say(f"llm-bot dev: {name} did not stop in {STOP_TIMEOUT_SECONDS:g} s: killed")
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        await asyncio.gather(*self._pumps, return_exceptions=True)


async def _until_ok(url: str) -> None:
    """Poll ``url`` (a plain HTTP/1.0 GET, standard library only) until it answers 200."""
    host_port, _, path = url.removeprefix("http://").partition("/")
    host, _, port = host_port.partition(":")
    request = f"GET /{path} HTTP/1.0\r\nHost: {host_port}\r\n\r\n".encode()
    while True:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(request)
                await writer.drain()
                status = await reader.readline()
            finally:
                writer.close()
            if status.split(b" ")[1:2] == [b"200"]:
                return
        await asyncio.sleep(0.25)


async def _pump(name: str, stream: asyncio.StreamReader) -> None:
    prefix = f"{name:>7} | ".encode()
    while line := await stream.readline():
        sys.stdout.buffer.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
        sys.stdout.buffer.flush()


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def run_dev(settings: Settings, *, model_port: int, digest: Callable[[str], str]) -> int:
    return await Launcher(DevPlan.of(settings, model_port, digest)).run()
