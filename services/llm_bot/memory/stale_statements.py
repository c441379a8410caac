"""Which recorded messages state a value that a correction replaced (pure).

When a fact is superseded ("budget 300 baht" by "budget 450 baht"), the message the user
first said it in ("My budget is 300 baht for this.") is still in the raw trace and in the
retrieval index, and a question about the budget would recall it next to the correction.
:func:`states_replaced_value` recognises such a message among the superseded fact's
source turns, so its index entries can go (the trace keeps it: ``memory show`` still has
the history):

- the **topic** of the correction is what the old and the new fact share (their keyword
  terms in common, "budget", "phone", "vegetarian"; without "the user", which every fact
  is about and no message says of itself): the message must mention some of it;
- and it must state the **old value**: a number, date or name the new fact dropped, or a
  word only the old fact had ("tea" against "coffee"); for a negation, the old polarity
  with most of the topic (``NEGATED_TOPIC_SHARE``).

The correcting message itself never matches (it states the new value). Deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Final

from llm_bot.memory.fact_values import fact_values, without_negation
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.long_term import EpisodicSummary, NotableEvent, SemanticFact

_FACT_SUBJECT: Final = re.compile(r"\b(?:the )?(?:user|customer|client)\b|ผู้ใช้|ลูกค้า", re.I)
"""Who a fact is about ("The user ...", "ลูกค้า..."): no message says it of itself."""
NEGATED_TOPIC_SHARE = 0.6
"""A negation's old statement mentions at least this share of the topic's terms."""


def _terms(text: str) -> set[str]:
    return set(keyword_terms(_FACT_SUBJECT.sub(" ", without_negation(text))))


def states_replaced_value(message: str, old: str, new: str) -> bool:
    """Whether ``message`` states what ``old`` said and ``new`` replaced."""
    old_terms, new_terms, said = _terms(old), _terms(new), _terms(message)
    topic = old_terms & new_terms
    if not topic or not (topic & said):
        return False
    before, after, stated = fact_values(old), fact_values(new), fact_values(message)
    if before.negated != after.negated:
        mentioned = len(topic & said) / len(topic)
        return stated.negated == before.negated and mentioned >= NEGATED_TOPIC_SHARE
    dropped = (
        (before.numbers - after.numbers)
        | (before.dates - after.dates)
        | (before.names - after.names - after.words)
    )
    if dropped & (stated.numbers | stated.dates | stated.words):
        return True
    return bool((old_terms - new_terms) & said)


def corrections(facts: Iterable[SemanticFact]) -> list[tuple[SemanticFact, SemanticFact]]:
    """(superseded fact, the fact that superseded it) for every superseded fact."""
    by_id = {fact.id: fact for fact in facts}
    return [
        (fact, by_id[fact.superseded_by])
        for fact in by_id.values()
        if fact.superseded_by is not None and fact.superseded_by in by_id
    ]


def restates_corrected(
    text: str,
    conversation_id: str,
    turns: Collection[int],
    replaced: Sequence[tuple[SemanticFact, SemanticFact]],
) -> bool:
    """Whether an item of ``conversation_id`` covering ``turns`` (an episode, a notable
    event) states the old value of a correction whose old fact came from those turns."""
    return any(
        source.conversation_id == conversation_id
        and not set(source.turns).isdisjoint(turns)
        and states_replaced_value(text, old.fact, new.fact)
        for old, new in replaced
        for source in old.sources
    )


def still_true(
    facts: Iterable[SemanticFact],
    episodes: Iterable[EpisodicSummary],
    events: Iterable[NotableEvent],
) -> tuple[list[EpisodicSummary], list[NotableEvent]]:
    """The episodes and notable events that state no value a correction among ``facts``
    replaced (what the bundle shows and the index recalls)."""
    replaced = corrections(facts)
    return (
        [
            e
            for e in episodes
            if not restates_corrected(e.summary, e.conversation_id, e.turns, replaced)
        ],
        [
            e
            for e in events
            if not restates_corrected(e.summary, e.conversation_id, (e.turn,), replaced)
        ],
    )


__all__ = ["corrections", "restates_corrected", "states_replaced_value", "still_true"]
