"""A responder for the fake model that answers the memory worker's prompts (used by
``llm-bot demo`` and the tests).

Chat requests get the usual echo; ``memory_compaction`` requests get a summarizer answer
derived from the turns they carry (with a fact for every "my name is X" and a profile
attribute for "I speak X"); ``classification`` requests get a classification whose
importance depends on keywords. Deterministic, so tests can assert exact content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from llm_bot.fake_model.scripts import RecordedRequest, default_responder

NAME = re.compile(r"my name is (\w+)", re.IGNORECASE)
LANGUAGE = re.compile(r"I speak (\w+)", re.IGNORECASE)
TURN = re.compile(r"turn (\d+) user: (.*)")


def schema_name(request: RecordedRequest) -> str | None:
    fmt: Any = request.body.get("response_format") or request.body.get("text", {}).get("format")
    if not isinstance(fmt, dict):
        return None
    if "json_schema" in fmt:
        return str(fmt["json_schema"].get("name"))
    return str(fmt.get("name")) if fmt.get("type") == "json_schema" else None


def memory_responder(
    request: RecordedRequest, chat: Callable[[RecordedRequest], str] = default_responder
) -> str:
    """Summarizer and classifier answers; ``chat`` answers everything else."""
    name = schema_name(request)
    if name == "memory_compaction":
        return _summarize(request)
    if name == "classification":
        return _classify(request.last_user_text())
    return chat(request)


def _summarize(request: RecordedRequest) -> str:
    data = json.loads(request.last_user_text())
    turns = TURN.findall(data["turns"])
    numbers = [int(n) for n, _ in turns]
    said = "; ".join(text for _, text in turns)
    facts = [
        {"fact": f"The user's name is {match}.", "tags": ["name"], "confidence": 0.9}
        for match in NAME.findall(said)
    ]
    profile = [{"key": "preferred_language", "value": m.lower()} for m in LANGUAGE.findall(said)]
    previous = data["rolling_summary"]
    span = f"turns {min(numbers)}-{max(numbers)}" if numbers else "no turns"
    return json.dumps(
        {
            "rolling_summary": (f"{previous} | " if previous else "") + f"{span}: {said[:80]}",
            "episode_summary": f"In {span} the user said: {said[:120]}",
            "episode_tags": ["chat"],
            "salience": 0.6,
            "facts": facts,
            "profile": profile,
        }
    )


def _classify(text: str) -> str:
    important = any(word in text.lower() for word in ("refund", "charged twice", "cancel"))
    return json.dumps(
        {
            "event_type": "TRANSACTION" if important else "GENERIC_EVENT",
            "importance": 0.95 if important else 0.2,
            "summary": text[:100],
            "tags": ["refund"] if important else [],
        }
    )
