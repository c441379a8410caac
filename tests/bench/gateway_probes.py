"""The gateway under the security review's probes: does a normal client stay served?

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.gateway_probes --seconds 10

Every part in its own process, as deployed: the fake model (instant), one ``llm-bot run``
consumer, one ``llm-bot gateway``. This process is a normal client (one non-streaming
completion after another, each a new user so no per-user limit is met); in each phase but
the first, a child process of this bench (``--probe NAME``) is an abusive client with
another tenant's key (its own process, as an attacker is: building and sending its bodies
does not slow the measuring client's event loop):

- ``idle``: nothing else (the baseline, same run);
- ``silent connections``: 200 connections opened and left silent (reopened when closed);
- ``slow headers``: 50 connections sending a header line a second;
- ``oversize bodies``: 4 MiB bodies, 4 at a time, back to back (413);
- ``220,000 messages``: 3.5 MB of messages, 4 at a time (413 at the body limit);
- ``nested JSON``: 200 kB of nesting, 4 at a time (400);
- ``one user flooding``: one user's requests 16 at a time (429 past its limits).

Printed per phase: the normal client's p50 / p99 and their ratio to idle, and the probe's
answers by status. Done when (issue 26): every p99 within 2x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from llm_bot.gateway.api_keys import key_digest
from tests.bench.processes import fake_model_process
from tests.support.gateway import TENANT_KEYS, gateway_keys
from tests.support.harness import settings_for_test
from tests.support.processes import ConsumerProcess
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

Probe = Callable[[str, int, Counter[str]], Awaitable[None]]
PROBE_ADDRESS = ("127.0.0.2", 0)
"""Where the connection probes come from: another address than the normal client's (a
loopback alias), as an attacker's would (the gateway caps connections per address)."""
PROBE_NAMES = (
    "silent connections",
    "slow headers",
    "oversize bodies",
    "220,000 messages",
    "nested JSON",
    "one user flooding",
)


def _request(user: str, messages: list[dict[str, str]] | None = None) -> bytes:
    body = {
        "model": "llm-bot",
        "user": user,
        "messages": messages or [{"role": "user", "content": "hello there"}],
    }
    return json.dumps(body).encode()


PROBE_TENANT = ["tenant_b"]
"""The tenant the running probe acts as (set by ``--probe``: the probe's own)."""
PROBE_KEYS = {name: f"sk-bench-probe-{n}-0123456789" for n, name in enumerate(PROBE_NAMES)}
"""A key (and tenant) of each probe's own: one probe's refusals never spill into the next."""


def _headers(tenant: str) -> dict[str, str]:
    key = TENANT_KEYS.get(tenant) or PROBE_KEYS[tenant]
    return {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "X-Conversation-Id": f"c{uuid.uuid4().hex[:12]}",
    }


async def normal_client(url: str, stop: asyncio.Event, latencies: list[float]) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            started = time.perf_counter()
            async with session.post(
                f"{url}/v1/chat/completions",
                data=_request(f"n{uuid.uuid4().hex[:10]}"),
                headers=_headers("tenant_a"),
            ) as response:
                await response.read()
                if response.status == 200:
                    latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)


async def silent_connections(url: str, port: int, answers: Counter[str]) -> None:
    async def one() -> None:
        while True:
            _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=PROBE_ADDRESS)
            answers["opened"] += 1
            with contextlib.suppress(OSError):
                await writer.wait_closed()  # returns once the gateway closes it
            await asyncio.sleep(0.1)

    await asyncio.gather(*(one() for _ in range(200)))


async def slow_headers(url: str, port: int, answers: Counter[str]) -> None:
    async def one() -> None:
        while True:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=PROBE_ADDRESS
            )
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            with contextlib.suppress(OSError):
                for n in range(100):
                    writer.write(b"X-Slow-%d: y\r\n" % n)
                    await writer.drain()
                    await asyncio.sleep(1.0)
                    if reader.at_eof():
                        break
            answers["cut off"] += 1
            writer.close()

    await asyncio.gather(*(one() for _ in range(50)))


def _posting(make_body: Callable[[], bytes]) -> Probe:
    async def probe(url: str, port: int, answers: Counter[str]) -> None:
        body = make_body()
        async with aiohttp.ClientSession() as session:

            async def one() -> None:
                while True:
                    try:
                        async with session.post(
                            f"{url}/v1/chat/completions",
                            data=body,
                            headers=_headers(PROBE_TENANT[0]),
                        ) as response:
                            await response.read()
                            answers[str(response.status)] += 1
                    except aiohttp.ClientError as exc:
                        answers[type(exc).__name__] += 1

            await asyncio.gather(*(one() for _ in range(4)))

    return probe


def _flooding_user() -> Probe:
    async def probe(url: str, port: int, answers: Counter[str]) -> None:
        async with aiohttp.ClientSession() as session:

            async def one() -> None:
                while True:
                    async with session.post(
                        f"{url}/v1/chat/completions",
                        data=_request("flooder"),
                        headers=_headers(PROBE_TENANT[0]),
                    ) as response:
                        await response.read()
                        answers[str(response.status)] += 1

            await asyncio.gather(*(one() for _ in range(16)))

    return probe


PROBES: dict[str, Probe | None] = {
    "idle": None,
    "silent connections": silent_connections,
    "slow headers": slow_headers,
    "oversize bodies": _posting(lambda: b"x" * (4 << 20)),
    "220,000 messages": _posting(
        lambda: _request("u", [{"role": "user", "content": "a"}] * 220_000)
    ),
    "nested JSON": _posting(lambda: b"[" * 100_000 + b"]" * 100_000),
    "one user flooding": _flooding_user(),
}


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 2 else float("nan")


async def run(args: argparse.Namespace) -> int:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    logs = Path(tempfile.mkdtemp(prefix="llm-bot-gateway-probes-"))
    async with fake_model_process(0.0) as model_url:
        settings = settings_for_test(
            urls,
            model_url,
            log_level="warning",
            embeddings="off",
            gateway_keys=",".join(
                [
                    gateway_keys(),
                    *(f"probe{n}={key_digest(k)}" for n, k in enumerate(PROBE_KEYS.values())),
                ]
            ),
        )
        consumer = ConsumerProcess(settings, log_path=logs / "consumer.log")
        gateway = ConsumerProcess(settings, log_path=logs / "gateway.log", command="gateway")
        try:
            await consumer.start()
            await consumer.wait_ready(within=60)
            await gateway.start()
            await gateway.wait_ready(within=60)
            assert gateway.api_port is not None
            url = f"http://127.0.0.1:{gateway.api_port}"
            print(f"logs in {logs}\n")
            print("| phase | normal p50 / p99 ms | p99 / idle p99 | requests | probe's answers |")
            print("|---|---|---|---|---|")
            idle_p99 = float("nan")
            verdicts: list[bool] = []
            for name, probe in PROBES.items():
                latencies: list[float] = []
                answers: Counter[str] = Counter()
                stop = asyncio.Event()
                abuse = (
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "tests.bench.gateway_probes",
                        "--probe",
                        name,
                        "--url",
                        url,
                        "--port",
                        str(gateway.api_port),
                        "--seconds",
                        str(args.seconds + 1),
                        stdout=asyncio.subprocess.PIPE,
                    )
                    if probe
                    else None
                )
                await asyncio.sleep(1.0 if abuse else 0.0)  # the probe under way first
                client = asyncio.create_task(normal_client(url, stop, latencies))
                await asyncio.sleep(args.seconds - 1.0 if abuse else args.seconds)
                stop.set()
                await client
                if abuse is not None:
                    out, _ = await abuse.communicate()
                    answers.update(json.loads(out or b"{}"))
                p50, p99 = _p(latencies, 50), _p(latencies, 99)
                if probe is None:
                    idle_p99 = p99
                ratio = p99 / idle_p99
                verdicts.append(probe is None or ratio <= 2.0)
                shown = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items())) or "-"
                print(
                    f"| {name} | {p50:.1f} / {p99:.1f} | {ratio:.2f} | {len(latencies)} | {shown} |",
                    flush=True,
                )
                await asyncio.sleep(1.0)
        finally:
            await gateway.stop()
            await consumer.stop()
    ok = all(verdicts)
    print(f"\n{'PASS' if ok else 'FAIL'}  every probe's p99 within 2x of idle")
    return 0 if ok else 1


async def probe_alone(args: argparse.Namespace) -> None:
    """The ``--probe`` child: run one probe for ``--seconds``, print its answers as JSON."""
    probe = PROBES[args.probe]
    assert probe is not None
    PROBE_TENANT[0] = args.probe
    answers: Counter[str] = Counter()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(args.seconds):
            await probe(args.url, args.port, answers)
    print(json.dumps(answers))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase")
    parser.add_argument(
        "--probe", choices=[n for n, p in PROBES.items() if p], help=argparse.SUPPRESS
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        asyncio.run(probe_alone(args))
        return
    raise SystemExit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
