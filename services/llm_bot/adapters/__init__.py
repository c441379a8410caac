"""Adapters: one module per technology (Redis, RabbitMQ, OpenAI)."""
