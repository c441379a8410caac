"""A RabbitMQ cluster of the tests' own: three nodes joined into one, on free ports.

Three :class:`PrivateRabbit` nodes (``service_control.py``: each its own node name, AMQP
and distribution ports, config file, the consistent-hash exchange plugin, Mnesia and log directories; all with
the machine's Erlang cookie, as every node of one user shares), started together, then the
second and third joined to the first (``stop_app``, ``join_cluster``, ``start_app``).
Built once per test session by the ``rabbit_cluster`` fixture and removed at the end (also
when a test fails). Tests set ``AMQP_URL`` to :attr:`RabbitClusterNodes.url`, the three
nodes separated by commas, as an operator would.

A test kills a node with :meth:`RabbitClusterNodes.kill` (SIGKILL of the node's Erlang VM:
no goodbye to clients or peers) and brings it back with :meth:`RabbitClusterNodes.restart`
(it rejoins from its own data directory).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.service_control import PrivateRabbit, listening, wait_until

NODES = 3
PLUGINS = ("rabbitmq_consistent_hash_exchange",)
"""Enabled on every node: ingress partitions (``LLM_BOT_INGRESS_PARTITIONS`` > 1) need it."""


@dataclass
class RabbitClusterNodes:
    directory: Path
    nodes: list[PrivateRabbit] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated: the cluster form of ``AMQP_URL``."""
        return ",".join(node.url for node in self.nodes)

    def start(self) -> None:
        self.directory.chmod(0o755)  # the nodes run as the rabbitmq user when started by root
        self.nodes = [PrivateRabbit(self.directory / f"node{i}", PLUGINS) for i in range(NODES)]
        _in_parallel([node.start for node in self.nodes])
        first, *others = self.nodes
        for node in others:
            node._ctl("stop_app")
            node._ctl("join_cluster", first.node)
            node._ctl("start_app")
        wait_until("every node running in one cluster", lambda: self._running() == NODES, 60)

    def node_of_connection(self, name: str) -> PrivateRabbit:
        """The node holding the client connection named ``name`` (its
        ``connection_name`` client property), asked of any running node."""
        asked = next(node for node in self.nodes if listening(node.port))
        table = asked._ctl(
            "list_connections", "port", "client_properties", "--quiet", "--no-table-headers"
        )
        ports = {
            int(port)
            for line in table.splitlines()
            for port, _, properties in [line.partition("\t")]
            if f'"{name}"' in properties and port.isdigit()
        }
        matches = [node for node in self.nodes if node.port in ports]
        if len(matches) != 1:
            raise LookupError(f"connection {name!r} is on {len(matches)} nodes: {table!r}")
        return matches[0]

    def kill(self, node: PrivateRabbit) -> None:
        """SIGKILL of ``node``'s Erlang VM; returns once its AMQP port is closed."""
        pid = int((node.directory / "node.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)
        wait_until(f"{node.node} to close port {node.port}", lambda: not listening(node.port), 15)
        (node.directory / "node.pid").unlink(missing_ok=True)

    def restart(self, node: PrivateRabbit) -> None:
        """Start a killed node again (same ports and data): it rejoins the cluster."""
        node.close()  # reaps the wrapper process the killed VM left behind
        node.start()
        wait_until(f"{node.node} back in the cluster", lambda: self._running() == NODES, 60)

    def _running(self) -> int:
        """How many nodes the first live node sees running."""
        asked = next((node for node in self.nodes if listening(node.port)), None)
        if asked is None:
            return 0
        status = asked._ctl("cluster_status", "--formatter", "json", check=False)
        return sum(f'"{node.node}"' in _running_section(status) for node in self.nodes)

    def close(self) -> None:
        _in_parallel([node.close for node in self.nodes])


def _running_section(status_json: str) -> str:
    """The ``running_nodes`` list of ``cluster_status --formatter json``, as text."""
    _, _, rest = status_json.partition('"running_nodes":')
    return rest.partition("]")[0]


def _in_parallel(actions: list[Callable[[], None]]) -> None:
    """Run ``actions`` in threads (each node's start or stop is mostly waiting); the first
    error is raised once all are done."""
    errors: list[BaseException] = []

    def run(action: Callable[[], None]) -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001  # reported below, from the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@contextlib.contextmanager
def rabbit_cluster() -> Iterator[RabbitClusterNodes]:
    """A running 3-node cluster of this test session's own, removed at the end."""
    cluster = RabbitClusterNodes(Path(tempfile.mkdtemp(prefix="llmbot-rabbit-cluster-")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(cluster.directory, ignore_errors=True)
