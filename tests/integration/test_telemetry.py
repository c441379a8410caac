"""Traces and metrics of real traffic: span tree, names, attributes, /metrics values."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable

import aiohttp
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from llm_bot.config import Settings
from llm_bot.entrypoints.http_server import HealthServer
from llm_bot.fake_model import FakeModelServer, Fault
from tests.support.events import message_event, new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration

PUBLISHER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PUBLISHER_SPAN = "00f067aa0ba902b7"


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


async def test_span_tree_continues_the_publishers_trace_into_the_candidate(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """CONSUMER ← publisher; INTERNAL per node; CLIENT chat under call_model; PRODUCER whose
    context is the candidate's traceparent."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = make_settings()
    event = message_event(tenant="ttr", user=new_id("u"), conversation=new_id("c"), text="hi")
    async with bot(settings, tracer_provider=provider) as (_, client):
        await client.publish(
            event, headers={"traceparent": f"00-{PUBLISHER_TRACE}-{PUBLISHER_SPAN}-01"}
        )
        candidate = await client.next_candidate()
    spans = exporter.get_finished_spans()
    consumer = _by_name(spans, f"process internal:{settings.ingress_routing_key}")
    assert consumer.kind is SpanKind.CONSUMER
    assert f"{consumer.context.trace_id:032x}" == PUBLISHER_TRACE
    assert consumer.parent is not None
    assert f"{consumer.parent.span_id:016x}" == PUBLISHER_SPAN
    assert consumer.attributes is not None
    assert consumer.attributes["messaging.system"] == "rabbitmq"
    assert consumer.attributes["messaging.operation.type"] == "process"
    assert consumer.attributes["messaging.message.id"] == event["id"]
    for node in ("ingest", "recall", "call_model", "build_candidate", "remember"):
        span = _by_name(spans, node)
        assert span.kind is SpanKind.INTERNAL
        assert span.parent is not None
        assert span.parent.span_id == consumer.context.span_id
    chat = _by_name(spans, "chat fake-model")
    assert chat.kind is SpanKind.CLIENT
    assert chat.parent is not None
    assert chat.parent.span_id == _by_name(spans, "call_model").context.span_id
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "127.0.0.1"  # the fake model's host
    assert chat.attributes["gen_ai.request.model"] == "fake-model"
    assert chat.attributes["gen_ai.response.model"] == "fake-model"
    assert chat.attributes["gen_ai.usage.input_tokens"] == candidate.body["usage"]["input_tokens"]
    assert chat.attributes["gen_ai.usage.output_tokens"] == candidate.body["usage"]["output_tokens"]
    assert chat.attributes["gen_ai.conversation.id"] == event["conversation_id"]
    producer = _by_name(spans, f"publish internal:{settings.candidate_routing_key}")
    assert producer.kind is SpanKind.PRODUCER
    assert producer.parent is not None
    assert producer.parent.span_id == consumer.context.span_id
    assert candidate.headers["traceparent"] == (
        f"00-{PUBLISHER_TRACE}-{producer.context.span_id:016x}-01"
    )


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_move_with_real_traffic_and_pass_promtool(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """After ok, skip, invalid and a retried event, /metrics shows each, and promtool agrees."""
    registry = CollectorRegistry()
    settings = make_settings(retry_base_seconds=0.02, memory_max_messages=2)
    user, conv = new_id("u"), new_id("c")
    fake_model.script("first", Fault.status(500), "second")
    async with bot(settings, registry=registry) as (_, client):
        server = HealthServer(host="127.0.0.1", port=0, checks={}, registry=registry)
        await server.start()
        try:
            for text in ("one", "two"):
                await client.publish(
                    message_event(tenant="tm", user=user, conversation=conv, text=text)
                )
                await client.next_candidate()
            await client.publish(
                message_event(tenant="tm", user=user, conversation=conv, text=None)
            )
            await client.publish(b"{not json")
            await client.dead_letters(1)
            await client.publish(
                message_event(tenant="tm", user=user, conversation=conv, text="three")
            )
            await client.next_candidate()
            async with asyncio.timeout(10):  # the last ack (and its metrics) follows the reply
                while True:
                    async with (
                        aiohttp.ClientSession() as session,
                        session.get(f"http://127.0.0.1:{server.port}/metrics") as response,
                    ):
                        assert response.status == 200
                        assert response.headers["Content-Type"].startswith("text/plain")
                        text = await response.text()
                    if 'llmbot_events_total{outcome="ok"} 3.0' in text:
                        break
                    await asyncio.sleep(0.05)
        finally:
            await server.stop()
    samples = _samples(text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("llmbot_events_total", outcome="ok") == 3
    assert value("llmbot_events_total", outcome="skip") == 1
    assert value("llmbot_events_total", outcome="dead_lettered") == 1
    assert value("llmbot_events_total", outcome="retried") == 1
    assert value("llmbot_events_total", outcome="duplicate") == 0
    assert value("llmbot_dead_letters_total", code="invalid_event") == 1
    assert value("llmbot_event_duration_seconds_count", outcome="ok") == 3
    assert value("llmbot_events_in_flight") == 0
    assert value("llmbot_model_request_duration_seconds_count", api="chat", result="ok") == 3
    assert value("llmbot_model_request_duration_seconds_count", api="chat", result="error") == 1
    assert value("llmbot_model_tokens_total", type="input") > 0
    assert value("llmbot_model_tokens_total", type="output") > 0
    assert value("llmbot_memory_window_messages_count") == 4  # every model call, retry included
    assert value("llmbot_memory_trims_total", reason="count") >= 2
    assert value("llmbot_last_processed_timestamp_seconds") > 0
    assert any(name == "llmbot_build_info" for name, _ in samples)
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (Debian) provides it"
    check = await asyncio.create_subprocess_exec(
        promtool,
        "check",
        "metrics",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await check.communicate(text.encode())
    assert check.returncode == 0, output.decode()
