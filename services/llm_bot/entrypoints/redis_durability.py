"""The rule applied to Redis's persistence and eviction settings when a process starts
(``run``, ``worker``, ``gateway`` with token budgets, ``inspect``; SPEC 7.2.1,
docs/deployment.md "Redis for memory").

``LLM_BOT_REDIS_DURABILITY`` chooses how strict it is:

- ``warn`` (the default): refuse an eviction policy other than ``noeviction`` (it deletes
  memory, leases and waiting work by itself, silently); start, with one warning and
  ``llmbot_redis_durable`` 0, on a master that is not durable (a development Redis);
- ``require``: refuse both, and a master whose settings cannot be read (the shipped
  compose sets it);
- ``off``: read nothing (a managed Redis that forbids ``CONFIG GET``, its settings checked
  by hand).

A refusal is a ``ConfigurationError``: one line naming the setting, the node and the fix,
before the process serves anything. The warnings and the gauge come once it started.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import structlog
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_settings import NodeSettings, read_node_settings
from llm_bot.config import ConfigurationError, RedisConfig
from llm_bot.redis_url import parse_redis_url
from llm_bot.telemetry.redis_metrics import RedisDurabilityMetrics

log = structlog.get_logger(__name__)

DOCS = "docs/deployment.md#redis-for-memory"


async def check_redis_durability(client: RedisClient, config: RedisConfig) -> RedisDurability:
    """Read every master's settings and refuse (``ConfigurationError``) what the rule
    refuses; what it warns about is reported by :meth:`RedisDurability.report`, once the
    process started (so a dependency that fails later still fails in one line)."""
    if config.durability == "off":
        return RedisDurability(nodes=[], durability="off")
    nodes = await read_node_settings(client, label=node_label(config))
    apply_rule(nodes, config.durability)
    return RedisDurability(nodes=nodes, durability=config.durability)


@dataclass(frozen=True)
class RedisDurability:
    """What was read at start, accepted by the rule."""

    nodes: list[NodeSettings]
    durability: str

    def report(self, *, registry: CollectorRegistry | None) -> None:
        """Warn once per master that is not durable or could not be read, and set
        ``llmbot_redis_durable`` per master in ``registry`` (when given)."""
        if self.durability == "off":
            log.info("redis.durability_not_checked", setting="LLM_BOT_REDIS_DURABILITY=off")
            return
        metrics = RedisDurabilityMetrics(registry=registry) if registry is not None else None
        for node in self.nodes:
            if not node.readable:
                _warn_unreadable(node)
                continue
            if metrics is not None:
                metrics.durable.labels(node.node).set(1 if node.durable else 0)
            if not node.durable:
                _warn_not_durable(node)


def apply_rule(nodes: list[NodeSettings], durability: str) -> None:
    """Refuse (``ConfigurationError``, one line) what ``durability`` does not accept: an
    eviction policy but ``noeviction`` always; with ``require``, a master that is not
    durable or whose settings cannot be read too."""
    for node in nodes:
        if node.can_evict:
            raise ConfigurationError(
                f"Redis at {node.node} has maxmemory-policy {node.eviction_policy}, which "
                "deletes users' memory, leases and waiting work when memory runs short; set "
                f"maxmemory-policy noeviction ({DOCS})"
            )
    if durability != "require":
        return
    for node in nodes:
        if not node.readable:
            raise ConfigurationError(
                f"Redis at {node.node} refused CONFIG GET ({node.error}), so its persistence "
                "and eviction cannot be checked; allow CONFIG GET to llm-bot's Redis user, or "
                f"check them by hand and set LLM_BOT_REDIS_DURABILITY=off ({DOCS})"
            )
        if not node.durable:
            raise ConfigurationError(
                f"Redis at {node.node} is not durable ({describe(node)}): a restart "
                "loses users' memory; set appendonly yes and appendfsync everysec, or "
                f"LLM_BOT_REDIS_DURABILITY=warn for a Redis you may lose ({DOCS})"
            )


def _warn_not_durable(node: NodeSettings) -> None:
    log.warning(
        "redis.not_durable",
        node=node.node,
        settings=describe(node),
        loses=(
            "everything at a restart"
            if not node.persists
            else "what was written since the last snapshot or fsync"
        ),
        fix="appendonly yes, appendfsync everysec",
        docs=DOCS,
    )


def _warn_unreadable(node: NodeSettings) -> None:
    log.warning(
        "redis.settings_unreadable",
        node=node.node,
        error=node.error,
        fix="allow CONFIG GET, or check the settings by hand and set LLM_BOT_REDIS_DURABILITY=off",
        docs=DOCS,
    )


def describe(node: NodeSettings) -> str:
    """The persistence settings as read, e.g. ``appendonly no, save ""``."""
    values = node.values
    parts = [f"appendonly {values.get('appendonly', '?')}"]
    if node.aof:
        parts.append(f"appendfsync {values.get('appendfsync', '?')}")
    parts.append(f'save "{values.get("save", "")}"')
    return ", ".join(parts)


def node_label(config: RedisConfig) -> str:
    """How a single server or Sentinel's master is named in lines and the gauge."""
    target = parse_redis_url(config.url.get_secret_value())
    if target.kind == "sentinel":
        return f"sentinel:{target.service}"
    parts = urlsplit(target.urls[0])
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
