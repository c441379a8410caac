"""An operator's fact edits (``memory/fact_edits.py``): a correction supersedes through the
worker's own rule with an operator source; a removal relinks what the fact had replaced."""

from __future__ import annotations

import pytest

from llm_bot.memory.fact_edits import OPERATOR, FactEditRefused, correction, removal
from llm_bot.memory.long_term import SemanticFact, Source, normalize_fact, stable_id

NOW = "2025-07-30T10:00:00+00:00"


def fact(text: str, *, superseded_by: str | None = None) -> SemanticFact:
    return SemanticFact(
        id=stable_id("fact", normalize_fact(text)),
        fact=text,
        tags=("home",),
        confidence=0.6,
        salience=0.7,
        sources=(Source(conversation_id="c1", turns=(2,)),),
        created_at="2025-07-01T00:00:00+00:00",
        updated_at="2025-07-01T00:00:00+00:00",
        superseded_by=superseded_by,
        superseded_at="2025-07-02T00:00:00+00:00" if superseded_by else None,
    )


def test_a_correction_supersedes_the_fact_with_an_operator_source() -> None:
    """The new value is current (operator source, confidence 1, the old salience and
    tags); the old one is kept, superseded by it."""
    old = fact("The user lives in Bangkok.")
    change = correction([old], old.id, "  The user lives in   Chiang Mai. ", now=NOW)
    new, retired = change.facts
    assert change.outcome == "updated"
    assert new.fact == "The user lives in Chiang Mai."
    assert (new.sources, new.confidence, new.salience, new.tags) == (
        (OPERATOR,),
        1.0,
        0.7,
        ("home",),
    )
    assert OPERATOR.provenance == "operator"
    assert (retired.id, retired.superseded_by, retired.superseded_at) == (old.id, new.id, NOW)


@pytest.mark.parametrize(
    ("value", "reason"),
    [("   ", "empty"), ("x" * 1001, "longer"), ("the user LIVES in bangkok", "already")],
)
def test_a_correction_is_refused_when_it_changes_nothing_or_is_not_a_value(
    value: str, reason: str
) -> None:
    """Blank, too long, or the value a current fact already holds: refused, with the reason."""
    old = fact("The user lives in Bangkok.")
    with pytest.raises(FactEditRefused, match=reason):
        correction([old], old.id, value, now=NOW)


def test_only_a_current_fact_can_be_edited() -> None:
    """A superseded fact, or an id the user has no fact by, is refused."""
    new = fact("The user lives in Chiang Mai.")
    old = fact("The user lives in Bangkok.", superseded_by=new.id)
    for fact_id in (old.id, "fact_missing"):
        with pytest.raises(FactEditRefused, match="not a current fact"):
            correction([old, new], fact_id, "The user lives in Lamphun.", now=NOW)
        with pytest.raises(FactEditRefused, match="not a current fact"):
            removal([old, new], fact_id)


def test_removing_a_correction_makes_what_it_replaced_current_again() -> None:
    """The removed fact is deleted; the fact it had superseded is current again."""
    new = fact("The user lives in Chiang Mai.")
    old = fact("The user lives in Bangkok.", superseded_by=new.id)
    other = fact("The user likes tea.")
    removed = removal([old, new, other], new.id)
    assert removed.deleted == (new.id,)
    [revived] = removed.rewritten
    assert (revived.id, revived.superseded_by, revived.superseded_at) == (old.id, None, None)


def test_removing_a_plain_fact_rewrites_nothing() -> None:
    """A fact that replaced nothing goes alone."""
    tea = fact("The user likes tea.")
    assert removal([tea, fact("The user lives in Bangkok.")], tea.id).rewritten == ()
