"""A provider's rate-limit storm: every model call answered 429 with Retry-After for a
while, with many events in flight (SPEC 4 "Provider rate limits").

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.rate_limit_storm
    .venv/bin/python -m tests.bench.rate_limit_storm --storm 20 --retry-after 5 --events 100

One ``llm-bot run`` consumer in this process (``tests.support.harness.bot``) against the
fake model (in this process, ``--latency`` per reply). ``--events`` message events over as
many conversations are published at once, so they are all in flight (prefetch = events).

- baseline: the same events, no storm: how long the last one takes to be answered;
- storm: the fake model answers every chat request ``429`` with ``Retry-After:
  --retry-after`` (and ``retry-after-ms``) for ``--storm`` seconds from the publish.

Printed for the storm: events answered and dead-lettered, how long after the limit lifted
the last one was answered, the calls the provider received while the limit lasted (all,
and the most in any one second), and the process's ``llmbot_model_paused_seconds_total``.
Done when (issue 24): nothing dead-lettered, every event answered within 10 s after the
limit lifts, at most 2 model calls per second while it lasts (the first wave, the calls
already in flight when it began, excepted). Exit code 0 when all hold.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter

from prometheus_client import CollectorRegistry

from llm_bot.fake_model import FakeModelServer
from llm_bot.logs import configure_logging
from tests.bench.throughput import remove_keys
from tests.support.events import message_event, new_id
from tests.support.harness import bot, settings_for_test
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls


async def run_once(
    urls: ServiceUrls, model: FakeModelServer, args: argparse.Namespace, *, storm: bool
) -> dict[str, float]:
    settings = settings_for_test(urls, model.base_url, prefetch=args.events, embeddings="off")
    registry = CollectorRegistry()
    model.clear()
    async with bot(settings, registry=registry) as (_, client):
        start = time.time()
        if storm:
            model.rate_limit(args.storm, retry_after=args.retry_after)
        refused_before = model.rate_limited
        for _ in range(args.events):
            await client.publish(
                message_event(tenant="storm", user=new_id("u"), conversation=new_id("c"), text="hi")
            )
        answered = 0
        last = start
        async with asyncio.timeout(args.storm + 120):
            while answered < args.events:
                await client.next_candidate(within=args.storm + 120)
                answered += 1
                last = time.time()
        await asyncio.sleep(0.5)
        errors = client.errors.qsize()
    lifted = start + (args.storm if storm else 0.0)
    during = [r.received_at for r in model.chat_requests() if storm and r.received_at < lifted]
    first_wave_end = start + 1.0  # the calls in flight when the storm began
    per_second = Counter(int(t - start) for t in during if t >= first_wave_end)
    paused = registry.get_sample_value("llmbot_model_paused_seconds_total") or 0.0
    dead = registry.get_sample_value("llmbot_events_total", {"outcome": "dead_lettered"}) or 0.0
    return {
        "answered": answered,
        "dead": dead,
        "errors": errors,
        "last_after_start": last - start,
        "last_after_lift": last - lifted,
        "refused": model.rate_limited - refused_before,
        "calls_during": len(during),
        "max_per_second": max(per_second.values(), default=0),
        "paused": paused,
    }


async def main_async(args: argparse.Namespace) -> int:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    async with FakeModelServer() as model:
        model.set_latency(args.latency)
        print(f"... baseline: {args.events} events in flight, no storm", flush=True)
        base = await run_once(urls, model, args, storm=False)
        print(
            f"... storm: every call 429 (Retry-After {args.retry_after:g}s) for {args.storm:g}s",
            flush=True,
        )
        storm = await run_once(urls, model, args, storm=True)
    print(f"removed {await remove_keys(urls.redis_url)} Redis keys of this run")
    print(
        f"baseline: {base['answered']:.0f}/{args.events} answered, the last after "
        f"{base['last_after_start']:.2f}s"
    )
    print(
        f"storm:    {storm['answered']:.0f}/{args.events} answered, {storm['dead']:.0f} "
        f"dead-lettered, {storm['errors']:.0f} ErrorV1; the last {storm['last_after_lift']:.2f}s "
        f"after the limit lifted; the provider refused {storm['refused']:.0f} calls, received "
        f"{storm['calls_during']:.0f} while limited (first wave included), at most "
        f"{storm['max_per_second']:.0f}/s after the first second; the process paused "
        f"{storm['paused']:.1f}s"
    )
    checks = {
        "nothing dead-lettered": storm["dead"] == 0 and storm["errors"] == 0,
        "every event answered": storm["answered"] == args.events,
        "answered within 10 s after the limit lifts": storm["last_after_lift"] <= 10.0,
        "at most 2 model calls per second while limited": storm["max_per_second"] <= 2,
    }
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--storm", type=float, default=20.0, help="seconds of 429s")
    parser.add_argument("--retry-after", type=float, default=5.0)
    parser.add_argument("--latency", type=float, default=0.05, help="model latency, s")
    args = parser.parse_args()
    configure_logging(level="warning", fmt="json")
    raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
