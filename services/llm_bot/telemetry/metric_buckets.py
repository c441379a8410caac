"""Histogram buckets the metrics share (seconds; messages)."""

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
WINDOW_BUCKETS = (0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 64)
