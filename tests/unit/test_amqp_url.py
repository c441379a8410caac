"""AMQP_URL's forms (one broker or load balancer, the nodes of a cluster) and the order a
process tries and rotates over the nodes."""

from __future__ import annotations

import asyncio

import pytest

from llm_bot.adapters.rabbit_connection import NodeRotatingConnection
from llm_bot.amqp_url import hosts_of, node_order, parse_amqp_url
from llm_bot.config import ConfigurationError, load_settings

PASSWORD = "s3cr3t-Pa55word"  # planted to check it is never shown
NODES = (
    f"amqp://bot:{PASSWORD}@rmq-0:5672/",
    f"amqp://bot:{PASSWORD}@rmq-1:5672/",
    f"amqp://bot:{PASSWORD}@rmq-2:5672/",
)


def test_one_url_is_one_node() -> None:
    """A broker or a load balancer: one URL, as before."""
    assert parse_amqp_url("amqp://bot:pw@lb:5672/vh") == ("amqp://bot:pw@lb:5672/vh",)


def test_a_comma_list_is_the_nodes_of_one_cluster() -> None:
    """Entries are split on commas and stripped of spaces, in the order written."""
    assert parse_amqp_url(" , ".join(NODES)) == NODES


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (f"{NODES[0]},rmq-1:5672", "node 2 of 2 is not an amqp:// or amqps:// URL"),
        (f"{NODES[0]},{NODES[1]},", "node 3 of 3 is empty"),
        (f"{NODES[0]},amqp://bot:{PASSWORD}@rmq-1:port/", "node 2 of 2 is not a URL"),
        ("http://rabbit:5672/", "is not an amqp:// or amqps:// URL"),
        ("", "is empty"),
    ],
)
def test_a_bad_entry_is_named_by_position(value: str, says: str) -> None:
    """The error names which entry is wrong and the form expected, never a password."""
    with pytest.raises(ValueError, match="expected") as caught:
        parse_amqp_url(value)
    assert says in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_a_bad_entry_is_a_configuration_error_naming_amqp_url() -> None:
    """Through the settings: one line naming AMQP_URL and the entry, no password."""
    with pytest.raises(ConfigurationError) as caught:
        load_settings(amqp_url=f"{NODES[0]},{NODES[1]},rmq-2")
    message = str(caught.value)
    assert message.startswith("invalid configuration: AMQP_URL: node 3 of 3")
    assert PASSWORD not in message


def test_settings_accept_a_node_list() -> None:
    """The comma list is a valid AMQP_URL, kept as written."""
    settings = load_settings(amqp_url=",".join(NODES))
    assert settings.amqp_url.get_secret_value() == ",".join(NODES)


def test_hosts_of_names_every_node_without_credentials() -> None:
    """What errors and logs show: host:port of each node (the amqps default is 5671)."""
    value = f"{NODES[0]},amqps://bot:{PASSWORD}@rmq-1/"
    assert hosts_of(value) == "rmq-0:5672, rmq-1:5671"


def test_node_order_is_a_shuffle_fixed_per_seed() -> None:
    """One process (one seed) always gets the same order; the orders of many processes
    start on every node."""
    nodes = tuple(f"amqp://rmq-{i}/" for i in range(3))
    assert node_order(nodes, seed=7) == node_order(nodes, seed=7)
    orders = {node_order(nodes, seed=pid) for pid in range(100)}
    assert all(sorted(order) == sorted(nodes) for order in orders)
    assert {order[0] for order in orders} == set(nodes)


async def test_each_lost_connection_moves_to_the_next_node_round_and_round() -> None:
    """The connection's target advances one node per close (a lost node or a failed
    attempt), wrapping after the last."""
    connection = NodeRotatingConnection(NODES, reconnect_interval=1)
    targets = [connection.node]
    for _ in range(4):
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lost.set_exception(ConnectionResetError("node gone"))
        await connection._on_connection_close(lost)  # the hook aio-pika calls
        targets.append(connection.node)
    await connection.close()
    assert targets == ["rmq-0:5672", "rmq-1:5672", "rmq-2:5672", "rmq-0:5672", "rmq-1:5672"]


async def test_one_url_stays_on_its_node() -> None:
    """Behind a load balancer every reconnect goes to the same URL."""
    connection = NodeRotatingConnection(("amqp://bot:pw@lb:5672/",))
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    lost.set_exception(ConnectionResetError("node gone"))
    await connection._on_connection_close(lost)  # the hook aio-pika calls
    await connection.close()
    assert connection.node == "lb:5672"
