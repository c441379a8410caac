"""OpenTelemetry tracing: the provider, W3C context in AMQP headers, span helpers.

Spans follow the current semantic conventions for messaging and GenAI; they are written
here rather than by the community aio-pika instrumentation, whose attribute names are
outdated. OTLP/HTTP export is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from llm_bot import __version__
from llm_bot.header_text import header_text

TRACER_NAME = "llm_bot"
TRACE_HEADERS = ("traceparent", "tracestate")
"""Headers the service reads (W3C trace context): text, or the delivery is refused."""


def build_tracer_provider(*, exporter: SpanExporter | None = None) -> TracerProvider:
    """A provider for service ``llm-bot``; exports to ``exporter`` if given, else over
    OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else nowhere."""
    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME", "llm-bot"),
            "service.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource)
    if exporter is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415  # only when configured
            OTLPSpanExporter,
        )

        exporter = OTLPSpanExporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def extract_context(headers: Mapping[str, Any]) -> Context:
    """The publisher's context from ``traceparent``/``tracestate`` headers."""
    carrier = {name: text for name in TRACE_HEADERS if (text := header_text(headers.get(name)))}
    return propagate.extract(carrier)


def inject_context(headers: MutableMapping[str, Any]) -> None:
    """Write the current context into ``headers`` as W3C trace context."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    headers.update(carrier)


def current_ids() -> dict[str, str]:
    """``trace_id``/``span_id`` of the current span, for logs (empty outside a span)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
