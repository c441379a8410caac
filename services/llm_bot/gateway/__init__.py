"""``llm-bot gateway``: an OpenAI-compatible HTTP front door onto the event bus (SPEC 7.1)."""
