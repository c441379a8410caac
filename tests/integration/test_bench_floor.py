"""The throughput bench's floor (tests/bench/floor.py) runs against the real services and
reports every part: a smoke test so the hand-run benchmark does not rot. No timings are
asserted (speed lives in the benchmark's printed figures, never in tests)."""

from __future__ import annotations

from tests.bench.floor import SPANS_PER_EVENT, measure_floor
from tests.support.services import ServiceUrls


async def test_floor_measures_each_part_alone_and_together(service_urls: ServiceUrls) -> None:
    floor = await measure_floor(
        amqp_url=service_urls.amqp_url, redis_url=service_urls.redis_url, count=20, concurrency=4
    )
    assert set(floor.alone) == {
        "LangGraph run, 5 no-op nodes",
        "openai SDK chat request (aiohttp)",
        "Redis, 4 round trips",
        "one more confirmed publish (memory job)",
        f"{SPANS_PER_EVENT} spans (no exporter)",
    }
    assert all(ms > 0 for ms in floor.parts.values())
    assert floor.total == sum(floor.alone.values())
    assert floor.together > 0
    assert floor.together_but_graph > 0
