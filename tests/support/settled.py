"""Waiting for the service to have settled its deliveries, instead of sleeping a guessed
time before a "nothing else happened" check.

Each delivery is counted in ``llmbot_events_total`` (by outcome) once it was acked or
dead-lettered, after its publishes were confirmed; ``retried`` counts retries, not
settlements. So once ``count`` deliveries are settled, whatever they published is in the
broker, and a check that nothing more was published or dead-lettered means it.
"""

from __future__ import annotations

import asyncio

from llm_bot.telemetry.metrics import Metrics

POLL_SECONDS = 0.01


def settled_count(metrics: Metrics) -> int:
    """Deliveries settled so far (every outcome but ``retried``)."""
    total = 0.0
    for family in metrics.registry.collect():
        if family.name != "llmbot_events":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("outcome") != "retried":
                total += sample.value
    return int(total)


async def settled(metrics: Metrics, count: int, *, within: float = 15.0) -> int:
    """Wait until at least ``count`` deliveries were settled; returns how many were."""
    async with asyncio.timeout(within):
        while (done := settled_count(metrics)) < count:
            await asyncio.sleep(POLL_SECONDS)
    return done
