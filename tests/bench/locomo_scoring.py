"""Scoring of the LoCoMo memory benchmark (pure; used by ``tests/bench/locomo.py``).

The dataset (Maharana et al., ACL 2024; CC BY-NC 4.0) is read from a path the user gives,
never stored in this repository. A question's evidence message counts as recalled when its
normalised text (lowercase, whitespace collapsed) is a substring of the normalised prompt;
a message over 300 characters also counts when at least 60% of its sentences of 20 or
more characters are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_bot.memory.memory_message import read_memory

LONG_MESSAGE = 300
SENTENCE_SHARE = 0.6
MIN_SENTENCE = 20
CATEGORIES = (1, 2, 3, 4)
"""1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5 (adversarial) has no evidence."""


def normalised(text: str) -> str:
    return " ".join(text.lower().split())


_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def evidence_found(evidence: str, prompt: str) -> bool:
    """Whether the evidence message is in the (already normalised) prompt text."""
    wanted = normalised(evidence)
    if wanted in prompt:
        return True
    if len(wanted) <= LONG_MESSAGE:
        return False
    sentences = [s for s in _SENTENCES.split(wanted) if len(s) >= MIN_SENTENCE]
    if not sentences:
        return False
    return sum(s in prompt for s in sentences) >= SENTENCE_SHARE * len(sentences)


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt's text as the model reads it: the memory message's JSON decoded (a
    quote in a recalled message is ``\\"`` on the wire)."""
    return normalised("\n".join(_message_text(m) for m in messages))


def _message_text(message: Mapping[str, Any]) -> str:
    memory = read_memory(message)
    if memory is None:
        return str(message.get("content") or "")
    return "\n".join(section_text(body) for body in memory.values())


def section_text(body: str | list[str] | dict[str, list[str]]) -> str:
    """A memory section's items one per line (a recalled line after its date's group)."""
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        return "\n".join(f"{group} {line}" for group, lines in body.items() for line in lines)
    return "\n".join(body)


@dataclass(frozen=True)
class Message:
    dia_id: str
    speaker: str
    text: str
    """With ``[shares a photo: <caption>]`` appended when the message shared a photo."""
    created_at: datetime


@dataclass(frozen=True)
class Session:
    number: int
    created_at: datetime
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    name: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def messages(self) -> dict[str, Message]:
        return {m.dia_id: m for s in self.sessions for m in s.messages}


def session_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def conversations(data: Sequence[Mapping[str, Any]]) -> Iterator[Conversation]:
    """The dataset's conversations with their category 1-4 questions whose evidence exists."""
    for index, raw in enumerate(data):
        conv = raw["conversation"]
        sessions = []
        number = 1
        while f"session_{number}" in conv:
            created = session_date(conv[f"session_{number}_date_time"])
            messages = tuple(
                Message(
                    dia_id=m["dia_id"],
                    speaker=m["speaker"],
                    text=m["text"]
                    + (f" [shares a photo: {m['blip_caption']}]" if m.get("blip_caption") else ""),
                    created_at=created,
                )
                for m in conv[f"session_{number}"]
            )
            sessions.append(Session(number, created, messages))
            number += 1
        known = {m.dia_id for s in sessions for m in s.messages}
        questions = tuple(
            Question(str(q["question"]), int(q["category"]), tuple(e for e in ev if e in known))
            for q in raw["qa"]
            if int(q.get("category", 0)) in CATEGORIES
            and (ev := [e.strip() for x in q.get("evidence", []) for e in str(x).split(";")])
            and any(e in known for e in ev)
        )
        yield Conversation(
            name=str(raw.get("sample_id", f"conv-{index}")),
            speaker_a=str(conv["speaker_a"]),
            speaker_b=str(conv["speaker_b"]),
            sessions=tuple(sessions),
            questions=questions,
        )


def recall_of(question: Question, messages: Mapping[str, Message], prompt: str) -> float:
    """The share of the question's evidence messages found in the normalised prompt."""
    found = sum(evidence_found(messages[e].text, prompt) for e in question.evidence)
    return found / len(question.evidence)


def last_n_prompt(
    conversation: Conversation, question: str, budget: int, count_messages: Any
) -> list[dict[str, str]]:
    """The recency baseline: the most recent messages of the history, as chat messages,
    that fit ``budget`` tokens together with the question."""
    history = [m for s in conversation.sessions for m in s.messages]
    chosen: list[dict[str, str]] = []
    current = {"role": "user", "content": question}
    for message in reversed(history):
        role = "user" if message.speaker == conversation.speaker_a else "assistant"
        candidate = [{"role": role, "content": message.text}, *chosen]
        if count_messages([*candidate, current]) > budget:
            break
        chosen = candidate
    return [*chosen, current]
