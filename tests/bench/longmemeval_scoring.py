"""Scoring of the LongMemEval benchmark (pure; used by ``tests/bench/longmemeval.py`` and
``longmemeval_ranking.py``).

LongMemEval_S (Wu et al., ICLR 2025; MIT license) is read from a path the user gives,
never stored in this repository. Each question comes with its own chat history (its
haystack: ~50 sessions of a user with a chat assistant, one date each) and marks the turns
holding the evidence (``has_answer``; some are the assistant's). An evidence turn counts as
recalled when its normalised text is in the normalised prompt (over 300 characters: when
at least 60% of its sentences of 20 or more characters are), as in ``locomo_scoring.py``.
Questions whose id ends in ``_abs`` (abstention) have no evidence and are not scored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.bench.locomo_scoring import evidence_found

TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    evidence: bool


@dataclass(frozen=True)
class Session:
    id: str
    created_at: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    id: str
    type: str
    text: str
    answer: str
    asked_at: datetime
    sessions: tuple[Session, ...]

    @property
    def evidence(self) -> list[str]:
        """The evidence turns' texts (each counted once)."""
        texts = [t.content for s in self.sessions for t in s.turns if t.evidence]
        return list(dict.fromkeys(t for t in texts if t.strip()))


def lme_date(text: str) -> datetime:
    """``2023/05/30 (Tue) 23:42`` as a UTC datetime."""
    day, _weekday, clock = text.split()
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def questions(data: Sequence[Mapping[str, Any]]) -> Iterator[Question]:
    """The scored questions (abstention questions left out), in the file's order."""
    for record in data:
        if str(record["question_id"]).endswith("_abs"):
            continue
        sessions = tuple(
            Session(
                id=str(session_id),
                created_at=lme_date(date),
                turns=tuple(
                    Turn(t["role"], str(t["content"]), bool(t.get("has_answer"))) for t in turns
                ),
            )
            for session_id, date, turns in zip(
                record["haystack_session_ids"],
                record["haystack_dates"],
                record["haystack_sessions"],
                strict=True,
            )
        )
        question = Question(
            id=str(record["question_id"]),
            type=str(record["question_type"]),
            text=str(record["question"]),
            answer=str(record["answer"]),
            asked_at=lme_date(record["question_date"]),
            sessions=sessions,
        )
        if question.evidence:
            yield question


def recall_of(question: Question, prompt: str) -> float:
    """The share of the question's evidence turns found in the normalised prompt."""
    evidence = question.evidence
    return sum(evidence_found(text, prompt) for text in evidence) / len(evidence)


def last_n_prompt(
    question: Question, budget: int, count_messages: Callable[[list[dict[str, str]]], int]
) -> list[dict[str, str]]:
    """The recency baseline: the most recent turns of the haystack (sessions by date) that
    fit ``budget`` tokens together with the question."""
    history = [t for s in sorted(question.sessions, key=lambda s: s.created_at) for t in s.turns]
    chosen: list[dict[str, str]] = []
    current = {"role": "user", "content": question.text}
    for turn in reversed(history):
        candidate = [{"role": turn.role, "content": turn.content}, *chosen]
        if count_messages([*candidate, current]) > budget:
            break
        chosen = candidate
    return [*chosen, current]
