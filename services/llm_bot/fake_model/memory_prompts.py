"""A responder for the fake model that answers the memory worker's prompts (used by
``llm-bot demo`` and the tests).

Chat requests get the usual echo; ``memory_compaction`` requests get a summarizer answer
derived from the turns they carry: a fact for each statement :data:`FACT_RULES` recognises
("my name is X", "my phone number is X", "I moved to X", "I am (not) vegetarian", "I prefer
X", "note for later: X" (X, verbatim to the end of the message, is the fact: how tests put
arbitrary text into facts), and Thai ones), compared with the stored facts the request carries as a real summarizer
would (``update`` of the stored fact about the same thing when the value changed, ``none``
when it is the same, else ``add``), and a profile attribute for "I speak X";
``classification`` requests get a classification whose importance depends on keywords.
Deterministic, so tests can assert exact content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_bot.fake_model.scripts import RecordedRequest, Reply, default_responder

LANGUAGE = re.compile(r"I speak (\w+)", re.IGNORECASE)
TURN = re.compile(r"^turn (\d+) user: (.*?)(?=\nturn \d+ |\Z)", re.MULTILINE | re.DOTALL)
"""A user line of the summarizer's turns, continued up to the next turn's line (a message
may span lines)."""


def schema_name(request: RecordedRequest) -> str | None:
    fmt: Any = request.body.get("response_format") or request.body.get("text", {}).get("format")
    if not isinstance(fmt, dict):
        return None
    if "json_schema" in fmt:
        return str(fmt["json_schema"].get("name"))
    return str(fmt.get("name")) if fmt.get("type") == "json_schema" else None


def memory_responder(
    request: RecordedRequest, chat: Callable[[RecordedRequest], Reply] = default_responder
) -> Reply:
    """Summarizer and classifier answers; ``chat`` answers everything else."""
    name = schema_name(request)
    if name == "memory_compaction":
        return _summarize(request)
    if name == "classification":
        return _classify(request.last_user_text())
    return chat(request)


@dataclass(frozen=True)
class FactRule:
    """A statement the fake summarizer turns into a fact: ``said`` finds it in a user turn,
    ``fact`` writes it (``{0}``: the first group), ``about`` finds the stored fact about the
    same thing."""

    said: re.Pattern[str]
    fact: str
    about: re.Pattern[str] | None
    """None: only a stored fact with the same text is about the same thing."""
    tag: str

    def is_about(self, stored: str, fact: str) -> bool:
        return stored == fact if self.about is None else bool(self.about.search(stored))


def _rule(said: str, fact: str, about: str | None, tag: str) -> FactRule:
    flags = re.IGNORECASE | re.DOTALL
    pattern = re.compile(about, re.IGNORECASE) if about is not None else None
    return FactRule(re.compile(said, flags), fact, pattern, tag)


FACT_RULES: tuple[FactRule, ...] = (
    _rule(r"my name is (\w+)", "The user's name is {0}.", r"^The user's name is ", "name"),
    _rule(
        r"my (?:new )?phone number is (?:now )?([\d-]+\d)",
        "The user's phone number is {0}.",
        r"^The user's phone number is ",
        "contact",
    ),
    _rule(
        r"my budget is (?:now )?(\d+ baht)",
        "The user's budget is {0}.",
        r"^The user's budget is ",
        "budget",
    ),
    _rule(
        r"I (?:live|moved|have moved|just moved) (?:in|to) ((?-i:[A-Z]\w*(?: [A-Z]\w*)*))",
        "The user lives in {0}.",
        r"^The user lives in ",
        "home",
    ),
    _rule(
        r"I(?: am|'m) ((?:not |no longer )?(?:a )?vegetarian)",
        "The user is {0}.",
        r"^The user is .*vegetarian",
        "diet",
    ),
    _rule(
        r"I (?:now )?prefer (\w+(?: \w+)?) (?:delivery|contact)",
        "The user prefers {0} delivery.",
        r"^The user prefers .* delivery",
        "delivery",
    ),
    _rule(r"ผม(ไม่ได้)?เป็นมังสวิรัติ", "ผู้ใช้{0}เป็นมังสวิรัติ", r"^ผู้ใช้.*เป็นมังสวิรัติ", "diet"),
    _rule(r"^note for later: (.+)", "{0}", None, "note"),
)


def _facts(said: list[str], stored: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The facts of the user's messages ``said`` in order of appearance, each with its
    action and target."""
    found: list[tuple[int, int, FactRule, str]] = []
    for index, message in enumerate(said):
        for rule in FACT_RULES:
            for match in rule.said.finditer(message):
                text = rule.fact.format(match.group(1) or "")
                found.append((index, match.start(), rule, text))
    facts: list[dict[str, Any]] = []
    for _, _, rule, text in sorted(found, key=lambda item: item[:2]):
        about = [item for item in stored if rule.is_about(item["fact"], text)]
        action, target = "add", None
        if about:
            target = about[-1]["id"]
            action = "none" if about[-1]["fact"] == text else "update"
        facts.append(
            {
                "fact": text,
                "tags": [rule.tag],
                "confidence": 0.9,
                "action": action,
                "target": target,
            }
        )
        if target is not None:
            stored = [item for item in stored if item["id"] != target]
        stored = [*stored, {"id": f"new-{len(facts)}", "fact": text}]
    return facts


def _summarize(request: RecordedRequest) -> str:
    data = json.loads(request.last_user_text())
    turns = TURN.findall(data["turns"])
    numbers = [int(n) for n, _ in turns]
    said = "; ".join(text for _, text in turns)
    facts = _facts([text for _, text in turns], list(data.get("stored_facts", [])))
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
