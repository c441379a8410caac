"""The rule applied to Redis's settings at start (``entrypoints/redis_durability.py``): which
settings are refused, warned about or accepted, under each ``LLM_BOT_REDIS_DURABILITY``."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from llm_bot.adapters.redis_settings import NodeSettings
from llm_bot.config import ConfigurationError
from llm_bot.entrypoints.redis_durability import RedisDurability, apply_rule, describe

AOF = {"appendonly": "yes", "appendfsync": "everysec", "save": "", "maxmemory-policy": ""}


def _node(**values: str) -> NodeSettings:
    merged = {**AOF, "maxmemory-policy": "noeviction"}
    merged.update({name.replace("_", "-"): value for name, value in values.items()})
    return NodeSettings(node="10.0.0.1:6379", values=merged)


@pytest.mark.parametrize(
    "policy",
    [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-ttl",
        "volatile-random",
    ],
)
@pytest.mark.parametrize("durability", ["warn", "require"])
def test_every_eviction_policy_but_noeviction_is_refused(policy: str, durability: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        apply_rule([_node(), _node(maxmemory_policy=policy)], durability)
    line = str(refused.value)
    assert "\n" not in line
    assert f"maxmemory-policy {policy}" in line
    assert "noeviction" in line
    assert "10.0.0.1:6379" in line


def test_a_durable_node_passes_silently() -> None:
    registry = CollectorRegistry()
    nodes = [_node(), _node(appendfsync="always")]
    with capture_logs() as logs:
        apply_rule(nodes, "require")
        RedisDurability(nodes=nodes, durability="require").report(registry=registry)
    assert logs == []
    assert registry.get_sample_value("llmbot_redis_durable", {"node": "10.0.0.1:6379"}) == 1.0


@pytest.mark.parametrize(
    ("values", "settings"),
    [
        ({"appendonly": "no"}, 'appendonly no, save ""'),
        ({"appendonly": "no", "save": "3600 1"}, 'appendonly no, save "3600 1"'),
        ({"appendfsync": "no"}, 'appendonly yes, appendfsync no, save ""'),
    ],
)
def test_a_node_that_is_not_durable_is_warned_about_or_refused(
    values: dict[str, str], settings: str
) -> None:
    node = _node(**values)
    assert not node.durable
    assert describe(node) == settings
    registry = CollectorRegistry()
    with capture_logs() as logs:
        apply_rule([node], "warn")  # accepted
        RedisDurability(nodes=[node], durability="warn").report(registry=registry)
    assert [(log["event"], log["settings"]) for log in logs] == [("redis.not_durable", settings)]
    assert registry.get_sample_value("llmbot_redis_durable", {"node": "10.0.0.1:6379"}) == 0.0
    with pytest.raises(ConfigurationError, match="appendonly yes and appendfsync everysec"):
        apply_rule([node], "require")


def test_a_node_that_refuses_config_get_is_warned_about_or_refused() -> None:
    node = NodeSettings(node="managed:6379", values={}, error="unknown command 'CONFIG'")
    with capture_logs() as logs:
        apply_rule([node], "warn")  # accepted
        RedisDurability(nodes=[node], durability="warn").report(registry=CollectorRegistry())
    assert [log["event"] for log in logs] == ["redis.settings_unreadable"]
    assert not node.can_evict
    assert not node.durable
    with pytest.raises(ConfigurationError, match="LLM_BOT_REDIS_DURABILITY=off"):
        apply_rule([node], "require")
