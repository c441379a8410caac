"""Observability: Prometheus metrics and OpenTelemetry traces, passed in, never global."""
