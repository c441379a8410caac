"""A Redis Cluster of the tests' own: three masters with one replica each, on free ports.

Six ``redis-server --cluster-enabled yes`` in a temporary directory (nothing persisted),
joined by ``redis-cli --cluster create --cluster-replicas 1``; built once per test session
by the ``redis_cluster`` fixture and removed at the end (also when a test fails). Tests
point ``REDIS_URL`` at any one node, as an operator would.

A failover (``CLUSTER FAILOVER`` on a replica) swaps a master and its replica while the
service runs; :meth:`RedisClusterNodes.failover` waits until every node agrees.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tests.support.service_control import listening, wait_until

NODES = 6


@dataclass
class RedisClusterNodes:
    directory: Path
    ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The URL of one node (the first), as ``REDIS_URL`` would name it."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

    def start(self) -> None:
        for _ in range(NODES):
            port = _free_cluster_port()
            node_dir = self.directory / str(port)
            node_dir.mkdir(parents=True)
            self.processes.append(
                subprocess.Popen(  # noqa: S603  # a fixed command
                    [  # noqa: S607  # redis-server from PATH, as the fault tests run it
                        "redis-server",
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "3000",
                        # a replica is promoted however long its link was down: a hard
                        # failover to a lagging replica is what the kill tests test
                        "--cluster-replica-validity-factor",
                        "0",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        str(node_dir),
                    ],
                    stdout=(node_dir / "server.out").open("ab"),
                    stderr=subprocess.STDOUT,
                )
            )
            self.ports.append(port)
        wait_until("the cluster's redis-servers", lambda: all(map(listening, self.ports)), 15)
        subprocess.run(  # noqa: S603  # a fixed command
            [  # noqa: S607  # redis-cli from PATH
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_until("the cluster to be ok on every node", self._settled, 30)

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot now."""
        client = self.client(self.ports[0])
        slot = int(_command(client, "CLUSTER", "KEYSLOT", key))
        for start, end, master, *_ in _command(client, "CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return int(master[1])
        raise LookupError(f"slot {slot} is not served")

    def keys_everywhere(self, pattern: str) -> set[str]:
        """Every key matching ``pattern`` on every master."""
        return {
            name.decode()
            for port in self.masters()
            for name in self.client(port).scan_iter(match=pattern, count=1000)
        }

    def masters(self) -> list[int]:
        return [port for port in self.ports if self._role(port) == "master"]

    def replica_of(self, master_port: int) -> int:
        for port in self.ports:
            info = self.client(port).info("replication")
            if info.get("role") == "slave" and int(info.get("master_port", 0)) == master_port:
                return port
        raise LookupError(f"no replica of {master_port}")

    def failover(self, master_port: int) -> int:
        """Promote the replica of ``master_port`` (a manual ``CLUSTER FAILOVER``); returns the
        new master's port once every node sees it."""
        replica = self.replica_of(master_port)
        _command(self.client(replica), "CLUSTER", "FAILOVER")
        wait_until("the failover", lambda: self._role(replica) == "master", 20)
        wait_until("the cluster to settle after the failover", self._settled, 30)
        return replica

    def kill_master(self, master_port: int) -> int:
        """SIGKILL the master at ``master_port`` (no handover: its replica is promoted by the
        cluster once the node timeout passes, with whatever it had replicated); returns the
        promoted replica's port once the surviving nodes agree."""
        replica = self.replica_of(master_port)
        process = self.processes[self.ports.index(master_port)]
        process.kill()
        process.wait(timeout=10)
        self.ports.remove(master_port)
        self.processes.remove(process)
        wait_until("the replica's promotion", lambda: self._role(replica) == "master", 30)
        wait_until("the cluster to settle without the dead master", self._settled, 30)
        return replica

    def _role(self, port: int) -> str:
        return str(self.client(port).info("replication").get("role"))

    def _settled(self) -> bool:
        with contextlib.suppress(redis.RedisError):
            for port in self.ports:
                info = _command(self.client(port), "CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text:
                    return False
            return True
        return False

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def _command(client: redis.Redis, *args: str) -> Any:
    """``client.execute_command(*args)``, which redis-py leaves unannotated."""
    execute: Callable[..., Any] = client.execute_command
    return execute(*args)


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (the port + 10,000) is free and valid too."""
    for _ in range(100):
        port = random.randrange(20_000, 50_000)  # not a secret
        if not listening(port) and not listening(port + 10_000) and _bindable(port + 10_000):
            with contextlib.suppress(OSError), socket.socket() as probe:
                probe.bind(("127.0.0.1", port))
                return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _bindable(port: int) -> bool:
    with contextlib.suppress(OSError), socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
        return True
    return False


@contextlib.contextmanager
def redis_cluster() -> Iterator[RedisClusterNodes]:
    """A running 3-master, 3-replica cluster of this test session's own, removed at the end."""
    nodes = RedisClusterNodes(Path(tempfile.mkdtemp(prefix="llmbot-redis-cluster-")))
    try:
        try:
            nodes.start()
        except FileNotFoundError as exc:
            raise RuntimeError(f"cluster tests need redis-server and redis-cli: {exc}") from exc
        yield nodes
    finally:
        nodes.close()
        shutil.rmtree(nodes.directory, ignore_errors=True)
