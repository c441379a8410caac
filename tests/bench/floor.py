"""(f) The floor under (b): what the libraries the pipeline is built on cost per event on
their own, each driven ``concurrency`` at a time the way the service drives them, with no
llm-bot code around them. Their sum is what a pipeline doing the same work with the same
libraries costs at the least; next to the echo's CPU per event it bounds (b)/(a).

Per event the service does: one LangGraph run of five nodes (two routing by
``Command``), one openai SDK chat request (aiohttp transport) to the model, four Redis
round trips (a 4-command pipeline, ``SET NX PX``, two ``EVALSHA``), one confirmed publish
more than the echo (the memory job), and eight spans. Each is measured here in isolation
as CPU seconds of this process per operation (the fake model runs in its own process).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import aio_pika
import redis.asyncio as aioredis
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from openai import AsyncOpenAI, DefaultAioHttpClient
from openai.types.chat import ChatCompletion
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from tests.bench.processes import fake_model_process
from tests.support.harness import TEST_KEY_PREFIX

SPANS_PER_EVENT = 8
PROMPT = [
    {"role": "system", "content": "You are a helpful shop assistant. " * 8},
    *(
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "words " * 20}
        for n in range(7)
    ),
    {"role": "user", "content": "how much is the blue kettle in store 3?"},
]
_SCRIPT = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


@dataclass
class Floor:
    """CPU milliseconds per event of each part alone, and of all parts per event
    (``together``), in this process."""

    parts: dict[str, float]

    @property
    def alone(self) -> dict[str, float]:
        return {k: v for k, v in self.parts.items() if not k.startswith("together")}

    @property
    def total(self) -> float:
        return sum(self.alone.values())

    @property
    def together(self) -> float:
        return self.parts["together"]

    @property
    def together_but_graph(self) -> float:
        """All parts but the LangGraph run: what a batch that shared one graph run among
        many events would still pay per event."""
        return self.parts["together but the graph"]


async def per_op(op: Callable[[int], Awaitable[object]], count: int, concurrency: int) -> float:
    """CPU seconds of this process per call of ``op``, ``concurrency`` calls in flight."""
    for n in range(min(count, 50)):  # warm up: connections, caches
        await op(n)
    queue = iter(range(count))

    async def lane() -> None:
        for n in queue:
            await op(n)

    start = time.process_time()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return (time.process_time() - start) / count


def _reducer(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [*(left or []), *(right or [])]


class GraphShapeState(TypedDict, total=False):
    """The shape of the service's graph state (11 keys, one with a reducer)."""

    event: Any
    lease_token: Any
    route: str
    recalled: Any
    turn: int
    turn_messages: Any
    messages: Annotated[list[Any], _reducer]
    context: Any
    reply: Any
    candidate: Any
    job: Any


def bare_graph() -> Any:
    """The service's graph shape with nodes that do nothing."""

    async def ingest(state: GraphShapeState) -> Command[str]:
        return Command(update={"route": "reply"}, goto="recall")

    async def recall(state: GraphShapeState) -> Command[str]:
        return Command(update={"turn": 1, "messages": [1]}, goto="call_model")

    async def step(state: GraphShapeState) -> dict[str, Any]:
        return {"reply": 1}

    graph = StateGraph(GraphShapeState)
    graph.add_node("ingest", ingest, destinations=("recall", END))
    graph.add_node("recall", recall, destinations=("call_model", "remember", END))
    for name in ("call_model", "build_candidate", "remember"):
        graph.add_node(name, step)
    graph.add_edge(START, "ingest")
    graph.add_edge("call_model", "build_candidate")
    graph.add_edge("build_candidate", "remember")
    graph.add_edge("remember", END)
    return graph.compile()


async def measure_floor(
    *, amqp_url: str, redis_url: str, count: int = 1000, concurrency: int = 32
) -> Floor:
    """Each part on its own, then all of them in sequence per event ("together"), which
    shows what sharing one process and event loop adds (caches, scheduling), and all but
    the graph run."""
    graph = bare_graph()
    redis = aioredis.from_url(redis_url)
    script = redis.register_script(_SCRIPT)
    prefix = f"{TEST_KEY_PREFIX}:floor:{uuid.uuid4().hex[:8]}"
    tracer = TracerProvider().get_tracer("floor")
    prompt_body = {"model": "fake-model", "messages": PROMPT}
    job_body = b'{"schema":"llmbot.memory_job.v1","id":"job_x","kind":"turn"}' * 3
    async with fake_model_process(0.0) as base_url:
        model = AsyncOpenAI(
            base_url=base_url, api_key="x", max_retries=0, http_client=DefaultAioHttpClient()
        )
        connection = await aio_pika.connect_robust(amqp_url)
        try:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            queue = await channel.declare_queue(
                f"bench.floor.{uuid.uuid4().hex[:8]}",
                durable=True,
                arguments={"x-queue-type": "quorum"},
            )

            async def run_graph(n: int) -> None:
                await graph.ainvoke({"event": n, "lease_token": "t"})

            async def call_model(n: int) -> None:
                await model.post("/chat/completions", body=prompt_body, cast_to=ChatCompletion)

            async def redis_round_trips(n: int) -> None:
                async with redis.pipeline(transaction=False) as pipe:
                    for kind in ("a", "b", "c", "d"):
                        pipe.get(f"{prefix}:{kind}:{n}")
                    await pipe.execute()
                await redis.set(f"{prefix}:lease:{n}", "t", nx=True, px=10_000)
                await script(keys=[f"{prefix}:lease:{n}"], args=["other"])
                await script(keys=[f"{prefix}:lease:{n}"], args=["t"])

            async def publish(n: int) -> None:
                message = aio_pika.Message(
                    job_body,
                    content_type="application/json",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    message_id=f"job_{n}",
                )
                await channel.default_exchange.publish(
                    message, queue.name, mandatory=True, timeout=15
                )

            async def spans(n: int) -> None:
                for _ in range(SPANS_PER_EVENT):
                    with tracer.start_as_current_span(
                        "span", kind=SpanKind.INTERNAL, attributes={"a": "b", "n": n}
                    ):
                        pass

            steps: dict[str, Callable[[int], Awaitable[None]]] = {
                "LangGraph run, 5 no-op nodes": run_graph,
                "openai SDK chat request (aiohttp)": call_model,
                "Redis, 4 round trips": redis_round_trips,
                "one more confirmed publish (memory job)": publish,
                f"{SPANS_PER_EVENT} spans (no exporter)": spans,
            }

            async def together(n: int) -> None:
                for step in steps.values():
                    await step(n)

            async def together_but_graph(n: int) -> None:
                for step in steps.values():
                    if step is not run_graph:
                        await step(n)

            parts = {name: await per_op(step, count, concurrency) for name, step in steps.items()}
            parts["together"] = await per_op(together, count, concurrency)
            parts["together but the graph"] = await per_op(together_but_graph, count, concurrency)
            await queue.delete(if_unused=False, if_empty=False)
        finally:
            await connection.close()
            await model.close()
            await redis.aclose()
    return Floor({name: seconds * 1000 for name, seconds in parts.items()})
