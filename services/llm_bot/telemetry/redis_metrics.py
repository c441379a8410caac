"""The Prometheus gauge of what Redis keeps (``llmbot_redis_durable``), set at start from
the settings of every master (``entrypoints/redis_durability.py``).

The ``node`` label is a master's ``host:port``: its values are bounded by the deployment's
Redis masters, never by traffic.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge


class RedisDurabilityMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.durable = Gauge(
            "llmbot_redis_durable",
            "1 when a Redis master keeps what it is told across a restart or host crash "
            "(appendonly yes with appendfsync everysec or always), 0 when it does not "
            "(nothing persists, or only RDB snapshots); read at start, per master. Absent "
            "with LLM_BOT_REDIS_DURABILITY=off or where CONFIG GET is refused.",
            ["node"],
            registry=registry,
        )
