"""What forgetting one conversation takes out of long-term memory (pure)."""

from __future__ import annotations

from llm_bot.memory.conversation_erasure import prune_conversation
from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
    Source,
)

T = "2025-07-01T10:00:00+00:00"
A = Source(conversation_id="ca", turns=(1,))
B = Source(conversation_id="cb", turns=(4,))


def fact(fact_id: str, *sources: Source, superseded_by: str | None = None) -> SemanticFact:
    return SemanticFact(
        id=fact_id,
        fact=f"fact {fact_id}",
        confidence=0.9,
        salience=0.5,
        sources=sources,
        created_at=T,
        updated_at=T,
        superseded_by=superseded_by,
        superseded_at=T if superseded_by else None,
    )


def test_items_only_from_the_conversation_go_and_shared_facts_lose_its_source() -> None:
    pruning = prune_conversation(
        "ca",
        profile={
            "lang": ProfileAttribute(key="lang", value="th", updated_at=T, source=A),
            "tz": ProfileAttribute(key="tz", value="+7", updated_at=T, source=B),
            "old": ProfileAttribute(key="old", value="x", updated_at=T),
        },
        facts=[fact("only_a", A), fact("both", A, B), fact("only_b", B)],
        episodes=[
            EpisodicSummary(id="ep_a", conversation_id="ca", turns=(1,), summary="s", salience=0.5, created_at=T),
            EpisodicSummary(id="ep_b", conversation_id="cb", turns=(4,), summary="s", salience=0.5, created_at=T),
        ],
        events=[
            NotableEvent(
                id="ne_a", event_type="COMPLAINT", importance=0.9, summary="s",
                conversation_id="ca", turn=1, event_id="e1", created_at=T,
            )
        ],
    )  # fmt: skip
    assert pruning.deleted == {
        "profile": ("lang",),
        "facts": ("only_a",),
        "episodes": ("ep_a",),
        "events": ("ne_a",),
    }
    assert [(f.id, f.sources) for f in pruning.rewritten] == [("both", (B,))]
    assert pruning.count() == 5


def test_a_fact_corrected_only_in_the_forgotten_conversation_is_current_again() -> None:
    """old (cb) ← superseded by mid (ca) ← superseded by new (cb): forgetting ca makes old
    point to new; forgetting a chain's last link revives the one before."""
    chain = [
        fact("old", B, superseded_by="mid"),
        fact("mid", A, superseded_by="new"),
        fact("new", B),
    ]
    pruning = prune_conversation("ca", profile={}, facts=chain, episodes=[], events=[])
    assert pruning.deleted["facts"] == ("mid",)
    assert [(f.id, f.superseded_by) for f in pruning.rewritten] == [("old", "new")]

    last = [fact("old", B, superseded_by="new"), fact("new", A)]
    pruning = prune_conversation("ca", profile={}, facts=last, episodes=[], events=[])
    (revived,) = pruning.rewritten
    assert (revived.id, revived.superseded_by, revived.superseded_at) == ("old", None, None)


def test_forgetting_a_conversation_that_left_nothing_changes_nothing() -> None:
    pruning = prune_conversation("cz", profile={}, facts=[fact("f", A)], episodes=[], events=[])
    assert pruning.count() == 0
    assert pruning.rewritten == ()
