"""Questions asked as real traffic asks them: many at once, on a freshly started service.

The quality benches ask one question at a time after a warm-up message, on a quiet
process. A shared service has ``LLM_BOT_PREFETCH`` (32) events in flight, and a replica
just deployed holds no user's index in memory. ``ask_all`` keeps ``in_flight`` questions
outstanding (each answered one is replaced by the next), and ``ByQuestion`` keeps the
prompt the fake model received for each question, so every answer is scored against its
own prompt whatever order the replies come in. ``outcomes`` reads how each search ended
(``searched``, ``timeout``, ...) from the ``recall.search`` spans.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from llm_bot.fake_model import RecordedRequest, ToolCalls
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from tests.support.harness import Integrator


class ByQuestion:
    """The fake model's responder: memory-worker answers, and each reply prompt kept by
    its last user message (the question as asked)."""

    def __init__(self) -> None:
        self.prompts: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, request: RecordedRequest) -> str | ToolCalls:
        if schema_name(request) is None:
            messages = request.messages()
            users = [m for m in messages if m.get("role") == "user"]
            if users:
                self.prompts[str(users[-1].get("content") or "")] = messages
        return memory_responder(request)

    @property
    def last(self) -> list[dict[str, Any]]:
        """The most recent prompt (for one question at a time)."""
        return next(reversed(self.prompts.values())) if self.prompts else []

    @last.setter
    def last(self, value: list[dict[str, Any]]) -> None:
        if not value:
            self.prompts.clear()


async def ask_all(
    client: Integrator, events: Sequence[dict[str, Any]], in_flight: int, *, within: float = 120
) -> None:
    """Publish ``events`` keeping ``in_flight`` unanswered at a time; return when every one
    has its candidate (a candidate answers one question: which one does not matter here)."""
    pending = list(events)
    outstanding = 0
    while pending or outstanding:
        while pending and outstanding < in_flight:
            await client.publish(pending.pop(0))
            outstanding += 1
        await client.next_candidate(within=within)
        outstanding -= 1


def outcomes(spans: Sequence[ReadableSpan]) -> Counter[str]:
    """How each ``recall.search`` ended, counted."""
    return Counter(
        str((span.attributes or {}).get("llmbot.retrieval.outcome", "?"))
        for span in spans
        if span.name == "recall.search"
    )
