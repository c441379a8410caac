"""A running llm-bot (in-process consumer) plus an integrator's view of the broker."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractRobustConnection,
)

from llm_bot.adapters.rabbit_connection import connect_amqp_robust
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.bootstrap import Service, Worker, build_service, build_worker
from llm_bot.config import Settings, load_settings
from llm_bot.entrypoints.startup import check_redis
from tests.support.events import encode
from tests.support.services import ServiceUrls

TEST_KEY_PREFIX = f"llmbot-test-{uuid.uuid4().hex[:8]}"
"""Redis key prefix of this test session: its keys are removed when the session ends."""

TEST_QUEUES: dict[str, set[str]] = {}
"""Broker URL -> the queues this session's settings name there (``settings_for_test``):
deleted when the session ends (``remove_test_queues``), whoever declared them: a test
that runs the service or the gateway without an integrator leaves its topology behind."""


def settings_for_test(urls: ServiceUrls, model_base_url: str, **overrides: Any) -> Settings:
    """Settings with topology names unique to one test, so tests never share queues."""
    suffix = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "redis_key_prefix": TEST_KEY_PREFIX,
        "amqp_url": urls.amqp_url,
        "redis_url": urls.redis_url,
        # The machine's and CI's Redis keep nothing (--save "" --appendonly no): tests
        # start on it with a warning, never refused for it (docs/deployment.md).
        "redis_durability": "warn",
        "openai_base_url": model_base_url,
        "openai_api_key": "test-key",
        "openai_model": "fake-model",
        "openai_timeout_ms": 5000,
        "ingress_routing_key": f"internal.llmbot.t{suffix}.v1",
        "ingress_queue": f"llm-bot.test.{suffix}",
        "candidate_routing_key": f"internal.candidate.t{suffix}.v1",
        "error_routing_key": f"internal.llmbot.error.t{suffix}.v1",
        "dlq": f"llm-bot.test.{suffix}.dlq",
        "memory_routing_key": f"internal.memory.t{suffix}.v1",
        "memory_queue": f"llm-bot.test.{suffix}.memory",
        "memory_dlq": f"llm-bot.test.{suffix}.memory.dlq",
        "flow_result_routing_key": f"internal.flow.result.t{suffix}.v1",
        "flow_result_queue": f"llm-bot.test.{suffix}.flow.result",
        "prefetch": 8,
        "shutdown_grace_seconds": 5,
    }
    values.update(overrides)
    settings = load_settings(**values)
    topology = replace(Topology.from_settings(settings.broker), flow_results=True)
    url = settings.amqp_url.get_secret_value()
    TEST_QUEUES.setdefault(url, set()).update(topology.queues())
    return settings


def remove_test_queues(amqp_url: str) -> None:
    """Deletes the queues this session's settings named on ``amqp_url`` (one connection;
    a queue already gone is no error: deleting is idempotent in RabbitMQ)."""
    names = sorted(TEST_QUEUES.pop(amqp_url, set()))
    if not names:
        return

    async def delete() -> None:
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            for name in names:
                await channel.queue_delete(name)

    # A session fixture's teardown may run beside a test's event loop: a thread of its own.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, delete()).result(timeout=60)


@dataclass
class Received:
    body: dict[str, Any]
    message_id: str | None
    correlation_id: str | None
    headers: Mapping[str, Any]


@dataclass
class Integrator:
    """Publishes events and collects candidates and errors, as an upstream service would."""

    settings: Settings
    connection: AbstractRobustConnection
    channel: AbstractChannel
    exchange: AbstractExchange
    candidates: asyncio.Queue[Received] = field(default_factory=asyncio.Queue)
    errors: asyncio.Queue[Received] = field(default_factory=asyncio.Queue)

    async def publish(
        self,
        event: dict[str, Any] | bytes,
        *,
        headers: Mapping[str, Any] | None = None,
        **properties: Any,
    ) -> None:
        """``properties``: AMQP properties by aio-pika's names, over the defaults."""
        body = event if isinstance(event, bytes) else encode(event)
        values: dict[str, Any] = {
            "content_type": "application/json",
            "delivery_mode": aio_pika.DeliveryMode.PERSISTENT,
            "message_id": None if isinstance(event, bytes) else str(event.get("id")),
            # SPEC 3: the conversation id (what ingress partitions hash)
            "correlation_id": None if isinstance(event, bytes) else event.get("conversation_id"),
            "headers": dict(headers or {}),
        }
        values.update(properties)
        await self.exchange.publish(
            aio_pika.Message(body, **values),
            routing_key=self.settings.ingress_routing_key,
        )

    async def next_candidate(self, within: float = 15.0) -> Received:
        return await asyncio.wait_for(self.candidates.get(), within)

    async def next_error(self, within: float = 15.0) -> Received:
        return await asyncio.wait_for(self.errors.get(), within)

    async def dead_letters(
        self, expected: int, within: float = 15.0
    ) -> list[AbstractIncomingMessage]:
        """Wait until the DLQ holds ``expected`` messages; return (and ack) them."""
        queue = await self.channel.declare_queue(self.settings.dlq, passive=True)
        found: list[AbstractIncomingMessage] = []
        async with asyncio.timeout(within):
            while len(found) < expected:
                message = await queue.get(fail=False)
                if message is None:
                    await asyncio.sleep(0.05)
                    continue
                await message.ack()
                found.append(message)
        return found

    async def flow_results(
        self, expected: int, within: float = 15.0, *, settle: float = 0.3
    ) -> list[dict[str, Any]]:
        """Wait until the flow results queue has given ``expected`` results; return (and
        ack) them, after ``settle`` seconds more to catch any extra."""
        queue = await self.channel.declare_queue(self.settings.flow_result_queue, passive=True)
        found: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        settled: float | None = None
        while loop.time() < deadline and (settled is None or loop.time() < settled):
            message = await queue.get(fail=False)
            if message is None:
                await asyncio.sleep(0.05)
                continue
            await message.ack()
            found.append(json.loads(message.body))
            if len(found) >= expected and settled is None:
                settled = loop.time() + settle
        return found

    async def wait_for_consumers(self, count: int = 1, within: float = 30.0) -> None:
        """Wait until ``count`` consumers are on the ingress queue (a process started)."""
        async with asyncio.timeout(within):
            while True:
                try:
                    channel = await self.connection.channel()
                    queue = await channel.declare_queue(self.settings.ingress_queue, passive=True)
                    await channel.close()
                    if (queue.declaration_result.consumer_count or 0) >= count:
                        return
                except aio_pika.exceptions.ChannelClosed:
                    pass  # the queue does not exist yet
                await asyncio.sleep(0.1)

    async def queue_depth(self, name: str) -> int:
        """Messages ready in a queue, asked on a fresh channel (robust channels cache
        passive declarations, so their counts go stale)."""
        channel = await self.connection.channel()
        try:
            queue = await channel.declare_queue(name, passive=True)
            return int(queue.declaration_result.message_count or 0)
        finally:
            await channel.close()

    async def ingress_depth(self) -> int:
        return await self.queue_depth(self.settings.ingress_queue)


async def _collect(queue: asyncio.Queue[Received], message: AbstractIncomingMessage) -> None:
    async with message.process():
        await queue.put(
            Received(
                body=json.loads(message.body),
                message_id=message.message_id,
                correlation_id=message.correlation_id,
                headers=dict(message.headers or {}),
            )
        )


@asynccontextmanager
async def integrator(settings: Settings, *, durable: bool = False) -> AsyncIterator[Integrator]:
    """Capture queues are exclusive by default; ``durable`` ones survive a broker restart.
    ``AMQP_URL`` may list a cluster's nodes: the integrator connects as the service does."""
    connection = await connect_amqp_robust(settings.amqp_url.get_secret_value())
    captured: list[str] = []
    try:
        channel = await connection.channel()
        exchange = await channel.declare_exchange(
            settings.ingress_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        client = Integrator(
            settings=settings, connection=connection, channel=channel, exchange=exchange
        )
        for routing_key, inbox in (
            (settings.candidate_routing_key, client.candidates),
            (settings.error_routing_key, client.errors),
        ):
            if durable:
                name = f"{settings.ingress_queue}.captured.{routing_key}"
                queue = await channel.declare_queue(
                    name, durable=True, arguments={"x-queue-type": "quorum"}
                )
                captured.append(name)
            else:
                queue = await channel.declare_queue(exclusive=True, auto_delete=True)
            await queue.bind(exchange, routing_key)
            await queue.consume(functools.partial(_collect, inbox))
        yield client
    finally:
        with contextlib.suppress(Exception):
            cleanup = await connection.channel()
            topology = replace(Topology.from_settings(settings.broker), flow_results=True)
            for name in (*topology.queues(), *captured):
                await cleanup.queue_delete(name)
        await connection.close()


@asynccontextmanager
async def running_service(settings: Settings, **wiring: Any) -> AsyncIterator[Service]:
    """``wiring``: ``tracer_provider`` / ``registry`` for ``build_service``."""
    service = build_service(settings, **wiring)
    await check_redis(service.redis)
    await service.consumer.start()
    try:
        yield service
    finally:
        await service.consumer.stop(grace_seconds=5)
        await service.close()


@asynccontextmanager
async def bot(settings: Settings, **wiring: Any) -> AsyncIterator[tuple[Service, Integrator]]:
    """The service consuming plus an integrator bound to its candidate and error keys.

    The integrator binds first so no candidate can be published before someone listens.
    """
    async with integrator(settings) as client, running_service(settings, **wiring) as service:
        yield service, client


@asynccontextmanager
async def running_worker(settings: Settings, **wiring: Any) -> AsyncIterator[Worker]:
    """The memory worker consuming its jobs queue in-process (no idle sweep loop)."""
    worker = build_worker(settings, **wiring)
    await check_redis(worker.redis)
    await worker.consumer.start()
    try:
        yield worker
    finally:
        await worker.consumer.stop(grace_seconds=5)
        await worker.close()
