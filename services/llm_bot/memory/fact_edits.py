"""An operator's edits of one fact (SPEC 7.3), pure: remove it, or correct its value.

- **Correct**: the new value supersedes the fact exactly as a correction the user states
  does (:func:`fact_updates.apply_fact` with an ``update`` naming it), its source an
  operator (``Source.provenance == "operator"``, no conversation), confidence 1; the old
  fact stays stored, superseded, with its history. A value that is already a current fact
  (the same text, normalized) is refused: nothing would be superseded.
- **Remove**: the fact is deleted; a fact it had superseded points past it, or is current
  again when nothing came after (``conversation_erasure.relinked``, the rule forgetting a
  conversation follows).

Only a current fact can be edited (a superseded one is history).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from llm_bot.memory.conversation_erasure import relinked
from llm_bot.memory.fact_updates import FactChange, FactDecision, apply_fact, is_current
from llm_bot.memory.long_term import SemanticFact, Source

MAX_FACT_CHARS = 1000
OPERATOR_CONFIDENCE = 1.0
OPERATOR = Source(conversation_id="", turns=(), provenance="operator")


class FactEditRefused(ValueError):
    """The edit cannot be made; ``str()`` is one line for the operator."""


@dataclass(frozen=True)
class FactRemoval:
    """The deletes and rewrites that remove one fact."""

    deleted: tuple[str, ...]
    rewritten: tuple[SemanticFact, ...] = ()
    """Facts it had superseded, pointed past it (current again when nothing came after)."""


def current_fact(facts: Iterable[SemanticFact], fact_id: str) -> SemanticFact:
    """The current fact ``fact_id``; ``FactEditRefused`` when there is none."""
    fact = next((f for f in facts if f.id == fact_id), None)
    if fact is None or not is_current(fact):
        raise FactEditRefused(f"{fact_id} is not a current fact of this user")
    return fact


def removal(facts: Iterable[SemanticFact], fact_id: str) -> FactRemoval:
    """What removing the current fact ``fact_id`` deletes and rewrites."""
    by_id = {fact.id: fact for fact in facts}
    gone = current_fact(by_id.values(), fact_id)
    rewritten = relinked(by_id, {gone.id: gone}, {})
    return FactRemoval(deleted=(gone.id,), rewritten=tuple(rewritten[i] for i in sorted(rewritten)))


def correction(facts: Iterable[SemanticFact], fact_id: str, value: str, *, now: str) -> FactChange:
    """The facts to write so that ``value`` supersedes the current fact ``fact_id``: the
    new current fact first, then the superseded one."""
    known = {fact.id: fact for fact in facts}
    old = current_fact(known.values(), fact_id)
    text = " ".join(value.split())
    if not text:
        raise FactEditRefused("the new value is empty")
    if len(text) > MAX_FACT_CHARS:
        raise FactEditRefused(f"the new value is longer than {MAX_FACT_CHARS} characters")
    decision = FactDecision(
        fact=text, tags=old.tags, confidence=OPERATOR_CONFIDENCE, action="update", target=old.id
    )
    change = apply_fact(known, decision, salience=old.salience, source=OPERATOR, now=now)
    if change.outcome != "updated":
        raise FactEditRefused("that value is already a current fact: nothing to correct")
    return change


__all__ = [
    "MAX_FACT_CHARS",
    "OPERATOR",
    "FactEditRefused",
    "FactRemoval",
    "correction",
    "current_fact",
    "removal",
]
