"""A RabbitMQ node and a Redis server of the fault tests' own, to stop and start at will.

Fault tests that stop a broker or Redis never touch the machine's services (which may
serve other work): each starts its own instance on free ports, with its data and logs in
a temporary directory, stops and restarts that one, and removes it at the end (also when
the test fails). They need the ``rabbitmq-server``/``rabbitmqctl`` and ``redis-server``
binaries (Debian's ``rabbitmq-server`` and ``redis-server`` packages); without them the
test fails and says so, it is never skipped.

RabbitMQ: a second node (``llmbot-test-<pid>-<n>@localhost``) with its own config file
(a TCP listener on its port only, no plugins), Mnesia and log directories, and
distribution port; it shares the machine's Erlang cookie and epmd, as any node of that
user does. Debian's ``rabbitmq-server`` runs the node as the ``rabbitmq`` user when
started by root, so the directory is handed to that user then.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Protocol, TypeVar

_nodes = count(1)


def _run(command: list[str], *, check: bool = True, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(  # noqa: S603  # fixed commands of this module
            command, check=check, capture_output=True, timeout=120, env=env, text=True
        )
    except FileNotFoundError as exc:
        raise RuntimeError(f"fault tests need {command[0]} on PATH: {exc}") from exc
    return done.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


def wait_until(condition: str, check: Callable[[], bool], within: float) -> None:
    """Poll ``check`` every 0.1 s until true; RuntimeError naming ``condition`` after
    ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {within:.0f} s waiting for {condition}")
        time.sleep(0.1)


def _hand_to(user: str, directory: Path) -> None:
    """Make ``directory`` ``user``'s when running as root and that user exists."""
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(user)
    except KeyError:
        return
    for path in (directory, *directory.rglob("*")):
        shutil.chown(path, user, user)


class PrivateRabbit:
    """A RabbitMQ node of one test's own: ``url`` to connect, ``stop_app``/``start_app``."""

    def __init__(self, directory: Path, plugins: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.plugins = plugins
        """Plugins to enable (of the installed RabbitMQ), e.g. the consistent-hash exchange."""
        self.port = free_port()
        self.node = f"llmbot-test-{os.getpid()}-{next(_nodes)}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self._process: subprocess.Popen[bytes] | None = None

    def _ctl(self, *args: str, check: bool = True) -> str:
        return _run(["rabbitmqctl", "-n", self.node, *args], check=check)

    def start(self, within: float = 90) -> None:
        for part in ("mnesia", "log"):
            (self.directory / part).mkdir(parents=True, exist_ok=True)
        (self.directory / "enabled_plugins").write_text(f"[{','.join(self.plugins)}].\n")
        (self.directory / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        _hand_to("rabbitmq", self.directory)
        env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_CONFIG_FILE": str(self.directory / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.directory / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.directory / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.directory / "log"),
            "RABBITMQ_PID_FILE": str(self.directory / "node.pid"),
        }
        try:
            self._process = subprocess.Popen(  # a fixed command
                ["rabbitmq-server"],  # noqa: S607  # found on PATH like rabbitmqctl
                env=env,
                stdout=(self.directory / "server.out").open("wb"),
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError as exc:
            raise RuntimeError(f"fault tests need rabbitmq-server on PATH: {exc}") from exc
        wait_until(f"RabbitMQ node {self.node} on port {self.port}", self._up, within)

    def _up(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            output = (self.directory / "server.out").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"RabbitMQ node {self.node} exited at start:\n{output}")
        return listening(self.port)

    def stop_app(self) -> None:
        self._ctl("stop_app")
        wait_until(f"{self.node} to close port {self.port}", lambda: not listening(self.port), 30)

    def start_app(self) -> None:
        self._ctl("start_app")
        self._ctl("await_startup", check=False)
        wait_until(f"{self.node} on port {self.port}", lambda: listening(self.port), 60)

    def close(self) -> None:
        self._ctl("stop", check=False)
        if self._process is not None:
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        pid_file = self.directory / "node.pid"
        if pid_file.exists():  # the node itself, when the wrapper went first
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text().strip()), 9)


class PrivateRedis:
    """A redis-server of one test's own (nothing persisted but a dump its saving shutdown
    writes, which the next start loads)."""

    def __init__(self, directory: Path, options: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.options = options
        """More ``redis-server`` arguments, after (so over) the defaults, e.g.
        ``("--appendonly", "yes")``."""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, within: float = 15) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            *self.options,
        ]
        try:
            self._process = subprocess.Popen(  # noqa: S603  # a fixed command
                command,
                stdout=(self.directory / "server.out").open("ab"),
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError as exc:
            raise RuntimeError(f"fault tests need redis-server on PATH: {exc}") from exc
        wait_until(f"redis-server on port {self.port}", lambda: listening(self.port), within)

    def shutdown_saving(self) -> None:
        """SHUTDOWN SAVE: the data survives into the next :meth:`start`."""
        _run(["redis-cli", "-p", str(self.port), "shutdown", "save"], check=False)
        if self._process is not None:
            self._process.wait(timeout=30)
        wait_until(f"redis-server to close port {self.port}", lambda: not listening(self.port), 10)

    def kill(self) -> None:
        """SIGKILL, as a host crash would stop it: no saving shutdown."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        wait_until(f"redis-server to close port {self.port}", lambda: not listening(self.port), 10)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)


class _Instance(Protocol):
    directory: Path

    def start(self) -> None: ...
    def close(self) -> None: ...


_I = TypeVar("_I", bound=_Instance)


@contextlib.contextmanager
def _running(instance: _I) -> Iterator[_I]:
    """``instance`` started, then closed and its directory removed (also on failure)."""
    try:
        instance.start()
        yield instance
    finally:
        instance.close()
        shutil.rmtree(instance.directory, ignore_errors=True)


def private_rabbit(*plugins: str) -> contextlib.AbstractContextManager[PrivateRabbit]:
    """A running node of this test's own (``plugins`` enabled), removed at the end."""
    return _running(PrivateRabbit(Path(tempfile.mkdtemp(prefix="llmbot-rabbit-")), plugins))


def private_redis(*options: str) -> contextlib.AbstractContextManager[PrivateRedis]:
    """A running redis-server of this test's own (``options``: more of its arguments),
    removed at the end."""
    return _running(PrivateRedis(Path(tempfile.mkdtemp(prefix="llmbot-redis-")), options))
