"""llm-bot: an event-driven chat bot with layered conversation memory."""

__version__ = "0.1.0"
