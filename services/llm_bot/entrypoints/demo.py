"""``llm-bot demo``: a full conversation end to end through RabbitMQ, with no API key.

Starts the project's fake OpenAI-compatible model (which also answers the memory worker's
summarizer and classifier prompts), runs the consumer and the memory worker in-process on
demo queue names (so a running service is not disturbed), imports an earlier support
chat with a human agent as a ``transcript`` event, publishes a seven-turn conversation as
an integrator would with a small window (6 messages; the last turn offers an order-lookup
tool, whose call the demo answers itself over the bus), prints each
CandidateV1, what the model was sent for the last turn, and every memory tier at the end:
the window, the rolling summary, and the long-term profile, facts, episodes and events
with their sources. Then the same user does the example check-in questionnaire (a flow
persona from ``examples/personas.yaml``) in a second conversation, and the demo prints
the FlowResultV1 it ends with.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage
from pydantic import SecretStr

from llm_bot.adapters.rabbit_connection import connect_amqp_robust
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.bootstrap import build_service, build_worker
from llm_bot.config import BrokerConfig, Settings
from llm_bot.entrypoints.memory_cli import forget_memory, render_memory, show_memory
from llm_bot.entrypoints.startup import check_redis
from llm_bot.fake_model import FakeModelServer, RecordedRequest, ToolCalls
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.fake_model.scripts import Reply
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.memory_message import is_memory_message

DEMO_PROMPTS = (
    "Hi! My name is Ann and I speak Thai.",
    "I'm looking for a blue kettle for my kitchen.",
    "Remind me: what did I say I was looking for?",
    "How much does it cost, and can it be delivered on a weekend?",
    "I was charged twice for my last order, I want a refund.",
    "Thanks! What do you remember about me?",
    "Last thing: did the replacement lid for my old order ever ship?",
)
EARLIER_CHAT = (
    ("user", "Hello, my order 3921 arrived but the teapot lid is cracked.", "Ann"),
    ("assistant", "Sorry about that! I've sent a replacement lid by courier today.", "Agent Ploy"),
    ("user", "Thank you, please ring the bell twice, the doorbell is broken.", "Ann"),
)
"""A chat with a human agent last month, imported as a ``transcript`` (retrieval finds it)."""
LOOKUP_ORDER = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order of the customer by its number.",
        "parameters": {
            "type": "object",
            "properties": {"order": {"type": "string"}},
            "required": ["order"],
        },
    },
}
"""The tool the last turn offers; the demo answers its calls itself, over the bus."""
CHECKIN_REPLIES = ("Good morning!", "six, I guess", "not really", "tea", "a walk in the park")
"""The check-in: the first message starts the flow, the others answer its questions."""
EXAMPLE_PERSONAS = Path(str(resources.files("llm_bot") / "examples" / "personas.yaml"))
ORDERS = {"3921": {"item": "replacement teapot lid", "status": "delivered", "on": "last week"}}
DEMO_WINDOW_MESSAGES = 6
WORKER_SETTLE_SECONDS = 30.0
CANDIDATE_WAIT_SECONDS = 30.0


def demo_responder(request: RecordedRequest) -> Reply:
    """A reply that shows what the model saw: how many earlier user turns were in context.
    Offered the order lookup, it first asks for it; given its result, it reads it out."""
    messages = request.messages()
    if messages and messages[-1].get("role") == "tool":
        return f"(fake model) The order lookup says: {messages[-1].get('content')}"
    if request.body.get("tools"):
        return ToolCalls.of(("lookup_order", json.dumps({"order": "3921"})))
    users = [m for m in request.window() if m.get("role") == "user"]
    if not users:
        return f"(fake model) I received: {request.prompt_text()[-160:]!r}"
    earlier = [str(m.get("content", "")) for m in users[:-1]]
    seen = "; ".join(f"{i + 1}) {text[:60]!r}" for i, text in enumerate(earlier)) or "none"
    return (
        f"(fake model) Earlier user turns in my context: {seen}. "
        f"You just said: {str(users[-1].get('content', ''))[:80]!r}"
    )


def demo_settings(settings: Settings, base_url: str) -> Settings:
    suffix = "demo"
    return settings.model_copy(
        update={
            "openai_base_url": base_url,
            "openai_api_key": SecretStr("demo"),
            "ingress_routing_key": f"internal.llmbot.{suffix}.v1",
            "ingress_queue": f"llm-bot.{suffix}.internal.llmbot.v1",
            "candidate_routing_key": f"internal.candidate.{suffix}.v1",
            "error_routing_key": f"internal.llmbot.error.{suffix}.v1",
            "dlq": f"llm-bot.{suffix}.internal.llmbot.v1.dlq",
            "memory_routing_key": f"internal.memory.{suffix}.v1",
            "memory_queue": f"llm-bot.{suffix}.memory.v1",
            "memory_dlq": f"llm-bot.{suffix}.memory.v1.dlq",
            "flow_result_routing_key": f"internal.flow.result.{suffix}.v1",
            "flow_result_queue": f"llm-bot.{suffix}.flow.result.v1",
            "personas_path": EXAMPLE_PERSONAS,
            "memory_max_messages": DEMO_WINDOW_MESSAGES,
        }
    )


def transcript_event(key: ConversationKey) -> dict[str, object]:
    """Last month's chat with a human agent, as an import of its own conversation."""
    when = datetime.now(UTC) - timedelta(days=30)
    return {
        "schema": "internal.event.v2",
        "id": f"imp_{uuid.uuid4().hex}",
        "type": "transcript",
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": f"{key.conversation_id}_earlier",
        "created_at": when.isoformat(),
        "transcript": [
            {"role": role, "text": text, "name": name} for role, text, name in EARLIER_CHAT
        ],
    }


async def _converse(
    connection: aio_pika.abc.AbstractRobustConnection,
    exchange: aio_pika.abc.AbstractExchange,
    broker: BrokerConfig,
    key: ConversationKey,
    inbox: asyncio.Queue[dict[str, Any]],
) -> None:
    """Publish the demo's turns one by one, answering tool calls, and print each reply."""
    for turn, text in enumerate(DEMO_PROMPTS, start=1):
        tools = [LOOKUP_ORDER] if turn == len(DEMO_PROMPTS) else None
        await _publish(exchange, broker, demo_event(key, text, tools))
        candidate = await asyncio.wait_for(inbox.get(), CANDIDATE_WAIT_SECONDS)
        print(f"turn {turn}  user: {text}")
        while candidate["kind"] == "tool_call":  # the demo runs the tools itself
            candidate = await _run_tools(exchange, broker, key, candidate, inbox)
        await _settle(connection, broker.memory_queue)  # let the worker catch up
        print(f"        bot:  {candidate['text']}")
        print(
            f"        candidate {candidate['id']} turn={candidate['turn']} "
            f"usage={candidate['usage']} memory={candidate['memory']}\n"
        )


async def _run_tools(
    exchange: aio_pika.abc.AbstractExchange,
    broker: BrokerConfig,
    key: ConversationKey,
    candidate: dict[str, Any],
    inbox: asyncio.Queue[dict[str, Any]],
) -> dict[str, Any]:
    """What an integrator does with a ``tool_call`` candidate: run each call, publish its
    ``tool.result``; returns the candidate that continues the turn."""
    for call in candidate["tool_calls"]:
        order = json.loads(call["arguments"]).get("order", "")
        result = json.dumps(ORDERS.get(order, {"error": f"no order {order}"}))
        print(f"        bot asks for a tool: {call['name']}({call['arguments']}) -> {result}")
        await _publish(exchange, broker, tool_result_event(key, call["id"], call["name"], result))
    return await asyncio.wait_for(inbox.get(), CANDIDATE_WAIT_SECONDS)


def tool_result_event(
    key: ConversationKey, call_id: str, name: str, content: str
) -> dict[str, object]:
    return {
        "schema": "internal.event.v2",
        "id": f"evt_{uuid.uuid4().hex}",
        "type": "tool.result",
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": key.conversation_id,
        "created_at": datetime.now(UTC).isoformat(),
        "source": {"platform": "demo", "channel": "cli"},
        "tool": {"tool_call_id": call_id, "name": name, "content": content},
    }


def demo_event(
    key: ConversationKey, text: str, tools: list[dict[str, Any]] | None = None
) -> dict[str, object]:
    extra: dict[str, object] = {"tools": tools} if tools else {}
    return {
        **extra,
        "schema": "internal.event.v2",
        "id": f"evt_{uuid.uuid4().hex}",
        "type": "message",
        "tenant_id": key.tenant_id,
        "user_id": key.user_id,
        "conversation_id": key.conversation_id,
        "created_at": datetime.now(UTC).isoformat(),
        "source": {"platform": "demo", "channel": "cli"},
        "annotations": [{"kind": "prompt", "text": text, "lang": "en"}],
    }


async def run_demo(settings: Settings) -> None:
    """Run the demo conversation and print it."""
    async with FakeModelServer(
        responder=lambda request: memory_responder(request, chat=demo_responder)
    ) as fake:
        settings = demo_settings(settings, fake.base_url)
        service = build_service(settings)
        worker = build_worker(settings)
        await check_redis(service.redis)
        await service.consumer.start()
        await worker.consumer.start()
        key = ConversationKey(
            "demo_tenant", f"demo_user_{uuid.uuid4().hex[:8]}", f"demo_{uuid.uuid4().hex[:12]}"
        )
        broker = settings.broker
        connection = await connect_amqp_robust(broker.url.get_secret_value())
        stopped = False
        try:
            channel = await connection.channel()
            exchange = await channel.get_exchange(broker.exchange)
            replies = await channel.declare_queue(exclusive=True, auto_delete=True)
            await replies.bind(exchange, broker.candidate_routing_key)
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

            async def collect(message: AbstractIncomingMessage) -> None:
                async with message.process():
                    await inbox.put(json.loads(message.body))

            await replies.consume(collect)
            await _import_earlier_chat(connection, exchange, broker, key)
            print(f"conversation {key.conversation_id} (model: fake server at {fake.base_url})\n")
            await _converse(connection, exchange, broker, key, inbox)
            last = [r for r in fake.chat_requests() if schema_name(r) is None][-1]
            await _settle(connection, broker.memory_queue)
            _print_prompt(last)
            print("\nmemory at the end (llm-bot memory show):")
            print(render_memory(await show_memory(settings, key)))
            await _check_in(channel, exchange, broker, key, inbox)
            await _settle(connection, broker.memory_queue)
            # Both drained and stopped before the erasure: a memory job still running would
            # find its user erased under it (and retry, warning, for nothing).
            await service.consumer.stop(grace_seconds=5)
            await worker.consumer.stop(grace_seconds=5)
            stopped = True
            erased = await forget_memory(settings, key.tenant_id, key.user_id, "*")
            print(f"\n(the demo user's memory was erased again: {erased} keys)")
        finally:
            if not stopped:
                await service.consumer.stop(grace_seconds=5)
                await worker.consumer.stop(grace_seconds=5)
            await service.close()
            await worker.close()
            cleanup = await connection.channel()
            topology = replace(Topology.from_settings(broker), flow_results=True)
            for queue in topology.queues():
                await cleanup.queue_delete(queue)
            await connection.close()


async def _check_in(
    channel: aio_pika.abc.AbstractChannel,
    exchange: aio_pika.abc.AbstractExchange,
    broker: BrokerConfig,
    key: ConversationKey,
    inbox: asyncio.Queue[dict[str, Any]],
) -> None:
    """The example check-in flow in a conversation of its own, then its FlowResultV1."""
    checkin = ConversationKey(key.tenant_id, key.user_id, f"{key.conversation_id}_checkin")
    print(f"\ncheck-in questionnaire (persona 'checkin', conversation {checkin.conversation_id}):")
    for number, text in enumerate(CHECKIN_REPLIES):
        event = demo_event(checkin, text)
        if number == 0:
            event["metadata"] = {"persona": "checkin"}
        await _publish(exchange, broker, event)
        candidate = await asyncio.wait_for(inbox.get(), CANDIDATE_WAIT_SECONDS)
        print(f"  user: {text}\n  bot:  {candidate['text']}")
    results = await channel.declare_queue(broker.flow_result_queue, passive=True)
    result: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def take(message: AbstractIncomingMessage) -> None:
        async with message.process():
            if not result.done():
                result.set_result(json.loads(message.body))

    tag = await results.consume(take)
    try:
        body = await asyncio.wait_for(result, CANDIDATE_WAIT_SECONDS)
    finally:
        await results.cancel(tag)
    print(f"FlowResultV1 on {broker.flow_result_routing_key}:")
    print(json.dumps(body, indent=2, ensure_ascii=False))


async def _publish(
    exchange: aio_pika.abc.AbstractExchange, broker: BrokerConfig, event: dict[str, object]
) -> None:
    """As an integrator publishes: persistent JSON, message and correlation ids set."""
    await exchange.publish(
        aio_pika.Message(
            json.dumps(event).encode(),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=str(event["id"]),
            correlation_id=str(event["conversation_id"]),
        ),
        routing_key=broker.ingress_routing_key,
    )


async def _import_earlier_chat(
    connection: aio_pika.abc.AbstractRobustConnection,
    exchange: aio_pika.abc.AbstractExchange,
    broker: BrokerConfig,
    key: ConversationKey,
) -> None:
    await _publish(exchange, broker, transcript_event(key))
    await _settle(connection, broker.ingress_queue)
    await _settle(connection, broker.memory_queue)
    print(f"imported last month's chat with a human agent ({len(EARLIER_CHAT)} messages)")


def _print_prompt(request: RecordedRequest) -> None:
    print("what the model was sent for the last turn:")
    for message in request.messages():
        content = str(message.get("content"))
        whole = message.get("role") == "system" or is_memory_message(message)
        shown = content if whole else content[:100]
        print(f"  {message.get('role')}: {shown}")


async def _settle(connection: aio_pika.abc.AbstractRobustConnection, queue: str) -> None:
    """Wait until the memory worker has drained its queue (a short quiet spell)."""
    quiet = 0
    async with asyncio.timeout(WORKER_SETTLE_SECONDS):
        while quiet < 3:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, passive=True)
            await channel.close()
            quiet = quiet + 1 if not declared.declaration_result.message_count else 0
            await asyncio.sleep(0.1)
