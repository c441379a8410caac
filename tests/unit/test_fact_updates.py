"""Facts that stay true (SPEC 5.5): corrections supersede, restatements merge."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_bot.memory.fact_updates import (
    FactDecision,
    Outcome,
    apply_fact,
    apply_facts,
    is_current,
    related_facts,
)
from llm_bot.memory.fact_values import adds_values, contradiction
from llm_bot.memory.long_term import LongTermBundle, SemanticFact, Source
from llm_bot.memory.recall_items import long_term_entry
from llm_bot.memory.retention import score, select_bundle

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OLD = Source(conversation_id="c1", turns=(1, 2), event_ids=("e1",))
NEW = Source(conversation_id="c1", turns=(40,), event_ids=("e40",))
T1 = "2025-07-01T10:00:00+00:00"
T2 = "2025-09-01T10:00:00+00:00"


def stored(text: str) -> dict[str, SemanticFact]:
    """Long-term memory holding one fact, learnt from ``OLD``."""
    first = apply_fact({}, FactDecision(text, confidence=0.8), salience=0.5, source=OLD, now=T1)
    return {f.id: f for f in first.facts}


def learn(
    known: dict[str, SemanticFact], decision: FactDecision, source: Source = NEW
) -> tuple[dict[str, SemanticFact], Outcome]:
    """``known`` after ``decision`` (from ``source``) and its outcome."""
    change = apply_fact(known, decision, salience=0.5, source=source, now=T2)
    return {**known, **{f.id: f for f in change.facts}}, change.outcome


def current(known: dict[str, SemanticFact]) -> list[str]:
    return sorted(f.fact for f in known.values() if is_current(f))


def only_id(known: dict[str, SemanticFact]) -> str:
    (fact_id,) = known
    return fact_id


# --- the four corrections of the issue, each with the summarizer's update -----------------

CORRECTIONS = [
    ("The user is vegetarian.", "The user is not vegetarian."),
    ("The user's phone number is 081-234-5678.", "The user's phone number is 089-765-4321."),
    (
        "The user lives in Bangkok and works as a nurse at a large public hospital.",
        "The user lives in Chiang Mai and works as a nurse at a large public hospital.",
    ),
    ("The user prefers tea in the morning.", "The user prefers coffee in the morning."),
    ("ผู้ใช้เป็นมังสวิรัติ", "ผู้ใช้ไม่ได้เป็นมังสวิรัติแล้ว"),
]
CORRECTION_IDS = ["negation", "phone", "move", "preference", "thai-negation"]


@pytest.mark.parametrize(("before", "after"), CORRECTIONS, ids=CORRECTION_IDS)
def test_an_update_supersedes_the_stored_fact(before: str, after: str) -> None:
    """One current fact with the new text; the old one kept, superseded by it."""
    known = stored(before)
    old_id = only_id(known)
    known, outcome = learn(known, FactDecision(after, action="update", target=old_id))
    assert outcome == "updated"
    assert current(known) == [after]
    old = known[old_id]
    assert old.fact == before
    assert old.superseded_by is not None
    assert known[old.superseded_by].fact == after
    assert old.superseded_at == T2
    assert known[old.superseded_by].sources == (NEW,)


@pytest.mark.parametrize(("before", "after"), CORRECTIONS, ids=CORRECTION_IDS)
def test_a_correction_the_summarizer_calls_a_restatement_still_supersedes(
    before: str, after: str
) -> None:
    """``none`` with a target whose value the text changes (negation, number, name) is an
    update; a changed preference without such a value needs the summarizer's word."""
    known = stored(before)
    known, outcome = learn(known, FactDecision(after, action="none", target=only_id(known)))
    if contradiction(before, after) is None:
        assert (outcome, current(known)) == ("merged", [before])
    else:
        assert (outcome, current(known)) == ("updated", [after])


@pytest.mark.parametrize(
    ("before", "after"),
    [CORRECTIONS[0], CORRECTIONS[4], ("The user eats meat.", "The user no longer eats meat.")],
    ids=["negation", "thai-negation", "no-longer"],
)
def test_a_negation_supersedes_even_when_the_summarizer_says_add(before: str, after: str) -> None:
    """A fact and its negation cannot both hold: the deterministic dedupe supersedes."""
    known, outcome = learn(stored(before), FactDecision(after, action="add"))
    assert (outcome, current(known)) == ("updated", [after])


def test_an_update_naming_no_stored_fact_replaces_the_closest_changed_one() -> None:
    """A hallucinated target: the most similar stored fact whose value the text changes."""
    known = stored("The user's phone number is 081-234-5678.")
    known.update(stored("The user lives in Bangkok."))
    decision = FactDecision("The user's phone number is 089-765-4321.", action="update")
    known, outcome = learn(known, FactDecision(**{**decision.__dict__, "target": "fact_nope"}))
    assert outcome == "updated"
    assert current(known) == ["The user lives in Bangkok.", decision.fact]


def test_a_changed_value_the_summarizer_adds_stands_beside_the_old_one() -> None:
    """Two dogs are two facts: without the summarizer's update, a changed name is kept
    side by side, never merged into the old text."""
    known, outcome = learn(
        stored("The user has a dog named Max."), FactDecision("The user has a dog named Rex.")
    )
    assert outcome == "added"
    assert current(known) == ["The user has a dog named Max.", "The user has a dog named Rex."]


def test_a_superseded_fact_stated_again_comes_back() -> None:
    """Vegetarian, then not, then vegetarian again: the first fact is current again (same
    id), the negation superseded by it."""
    known = stored("The user is vegetarian.")
    first = only_id(known)
    known, _ = learn(
        known, FactDecision("The user is not vegetarian.", action="update", target=first)
    )
    later = Source(conversation_id="c2", turns=(3,))
    known, outcome = learn(
        known, FactDecision("The user is vegetarian.", action="update", target=first), later
    )
    assert outcome == "updated"
    assert current(known) == ["The user is vegetarian."]
    assert known[first].superseded_by is None
    assert known[first].sources == (OLD, later)
    (negation,) = (f for f in known.values() if f.id != first)
    assert negation.superseded_by == first


@pytest.mark.parametrize(("before", "after"), CORRECTIONS, ids=CORRECTION_IDS)
def test_rerunning_the_same_compaction_changes_nothing(before: str, after: str) -> None:
    """The same batch again (same source, same decisions): every fact stays as it is."""
    known = stored(before)
    decision = FactDecision(after, action="update", target=only_id(known))
    once, _ = learn(known, decision)
    twice, outcome = learn(once, decision)
    assert outcome == "unchanged"
    assert twice == once


@pytest.mark.parametrize(
    ("before", "restated", "action"),
    [
        ("The user is vegetarian.", "the user is vegetarian", "add"),
        ("The user prefers email contact.", "User prefers email contact", "add"),
        ("The user prefers delivery on weekends.", "The user likes weekend deliveries.", "none"),
        ("ผู้ใช้เป็นมังสวิรัติ", "ผู้ใช้เป็นมังสวิรัติ!", "add"),
        ("ผู้ใช้เป็นมังสวิรัติ", "ผู้ใช้ทานมังสวิรัติ", "none"),
    ],
)
def test_restatements_still_merge(before: str, restated: str, action: str) -> None:
    """A restatement (or the summarizer's ``none``) raises the stored fact's confidence and
    adds its source: one current fact, no superseded one."""
    known = stored(before)
    target = only_id(known) if action == "none" else None
    decision = FactDecision(restated, confidence=0.8, action=action, target=target)  # type: ignore[arg-type]
    after, outcome = learn(known, decision)
    assert outcome == "merged"
    assert list(after) == list(known)
    fact = after[only_id(known)]
    assert fact.fact == before
    assert fact.confidence > 0.8
    assert fact.sources == (OLD, NEW)


def test_an_elaboration_merges_and_keeps_the_richer_text() -> None:
    """A restatement that adds a value and changes none keeps the id, takes the text."""
    known = stored("The user lives in Chiang Mai.")
    after, outcome = learn(known, FactDecision("The user lives in Chiang Mai, Thailand."))
    assert outcome == "merged"
    assert [f.fact for f in after.values()] == ["The user lives in Chiang Mai, Thailand."]
    assert list(after) == list(known)


def test_one_batch_can_correct_a_fact_twice() -> None:
    """Two changes in one batch: the last value is current, both earlier ones superseded."""
    known = stored("The user's phone number is 081-111-1111.")
    facts, outcomes = apply_facts(
        known.values(),
        [
            FactDecision(
                "The user's phone number is 082-222-2222.", action="update", target=only_id(known)
            ),
            FactDecision(
                "The user's phone number is 083-333-3333.", action="update", target="new-1"
            ),
        ],
        salience=0.5,
        source=NEW,
        now=T2,
    )
    assert outcomes == ["updated", "updated"]
    merged = {**known, **{f.id: f for f in facts}}
    assert current(merged) == ["The user's phone number is 083-333-3333."]
    assert len(merged) == 3


def test_superseded_facts_never_reach_a_prompt_or_the_index() -> None:
    """Out of the bundle, never indexed for recall, first to go under retention."""
    known = stored("The user is vegetarian.")
    known, _ = learn(
        known, FactDecision("The user is not vegetarian.", action="update", target=only_id(known))
    )
    old = next(f for f in known.values() if not is_current(f))
    bundle = select_bundle(profile=[], facts=list(known.values()), episodes=[], events=[])
    assert [f.fact for f in bundle.facts] == ["The user is not vegetarian."]
    assert long_term_entry(old, indexed_at=0.0) is None
    assert score(old) == 0.0
    assert LongTermBundle().facts == ()


def test_the_summarizer_sees_the_related_current_facts() -> None:
    """All current facts when few; otherwise those sharing the most words with the turns;
    never a superseded one; in id order."""
    known = stored("The user is vegetarian.")
    known, _ = learn(
        known, FactDecision("The user is not vegetarian.", action="update", target=only_id(known))
    )
    assert [f.fact for f in related_facts(known.values(), "anything")] == [
        "The user is not vegetarian."
    ]
    many = {**known}
    for n in range(40):
        many.update(stored(f"The user owns gadget model {n}."))
    chosen = related_facts(many.values(), "is the user still vegetarian?", limit=5)
    assert len(chosen) == 5
    assert "The user is not vegetarian." in [f.fact for f in chosen]
    assert [f.id for f in chosen] == sorted(f.id for f in chosen)


# --- fact values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "difference"),
    [
        ("The user is vegetarian.", "The user is not vegetarian.", "negation"),
        ("The user doesn't drive.", "The user drives.", "negation"),
        ("The user isn\u2019t married.", "The user is married.", "negation"),
        ("ลูกค้าชอบสีแดง", "ลูกค้าไม่ชอบสีแดง", "negation"),
        ("The order number is 4471.", "The order number is 4472.", "number"),
        ("เบอร์โทรคือ ๐๘๑-๒๓๔-๕๖๗๘", "เบอร์โทรคือ 089-765-4321", "number"),
        ("The user has two kids.", "The user has three kids.", "number"),
        ("Delivery on Saturday suits the user.", "Delivery on Monday suits the user.", "date"),
        ("ลูกค้าสะดวกวันเสาร์", "ลูกค้าสะดวกวันจันทร์", "date"),
        ("The user lives in Bangkok.", "The user lives in Chiang Mai.", "name"),
        ("The user prefers email contact.", "the USER prefers EMAIL contact", None),
        ("The user lives in Chiang Mai, Thailand.", "The user lives in Chiang Mai.", None),
        ("The user has kids.", "The user has 2 kids.", None),
        ("ผู้ใช้ไม่กินเนื้อ", "ผู้ใช้ไม่กินเนื้อวัว", None),
        (
            "The user said no to the offer. It was not cheap.",
            "The user said no to the offer.",
            "negation",
        ),
    ],
)
def test_contradiction_names_what_changed(old: str, new: str, difference: str | None) -> None:
    assert contradiction(old, new) == difference


def test_an_elaboration_adds_values_and_a_change_does_not() -> None:
    assert adds_values("The user lives in Chiang Mai.", "The user lives in Chiang Mai, Thailand.")
    assert not adds_values("The user lives in Bangkok.", "The user lives in Chiang Mai.")
    assert not adds_values("The user is vegetarian.", "the user is vegetarian")


# --- properties: English and Thai pairs ---------------------------------------------------

SUBJECTS = st.sampled_from(["The user", "The customer", "Ann", "ผู้ใช้", "ลูกค้า"])
PREDICATES = st.sampled_from(
    [
        "is vegetarian",
        "likes spicy food",
        "drives to work",
        "เป็นมังสวิรัติ",
        "ชอบอาหารเผ็ด",
        "ขับรถไปทำงาน",
    ]
)
NUMBERS = st.integers(min_value=0, max_value=10**9)


def negate(predicate: str) -> str:
    if predicate[0].isascii():
        verb, _, rest = predicate.partition(" ")
        return f"is not {rest}" if verb == "is" else f"does not {verb.removesuffix('s')} {rest}"
    return "ไม่" + predicate


def restated(text: str, variant: int) -> str:
    """The same statement in another case, punctuation or spacing."""
    return [text.upper(), text + "!", "  " + text.replace(" ", "   ") + " ", text.lower() + "."][
        variant
    ]


@SETTINGS
@given(subject=SUBJECTS, predicate=PREDICATES, action=st.sampled_from(["add", "none"]))
def test_a_fact_and_its_negation_never_merge(subject: str, predicate: str, action: str) -> None:
    """Whatever the summarizer says, the negation of a stored fact never raises its
    confidence: it supersedes it."""
    before = f"{subject} {predicate}"
    known = stored(before)
    target = only_id(known) if action == "none" else None
    decision = FactDecision(f"{subject} {negate(predicate)}", action=action, target=target)  # type: ignore[arg-type]
    after, outcome = learn(known, decision)
    assert outcome == "updated"
    assert current(after) == [decision.fact]


@SETTINGS
@given(
    subject=SUBJECTS,
    thing=st.sampled_from(["phone number is", "order number is", "เบอร์โทรคือ", "รหัสสมาชิกคือ"]),
    old=NUMBERS,
    new=NUMBERS,
    action=st.sampled_from(["add", "none"]),
)
def test_facts_with_another_number_never_merge(
    subject: str, thing: str, old: int, new: int, action: str
) -> None:
    """A changed number is never absorbed into the old text (kept beside it, or superseding
    it when the summarizer points at it)."""
    if old == new:
        return
    known = stored(f"{subject} {thing} {old}")
    target = only_id(known) if action == "none" else None
    decision = FactDecision(f"{subject} {thing} {new}", action=action, target=target)  # type: ignore[arg-type]
    after, outcome = learn(known, decision)
    assert outcome in ("added", "updated")
    assert decision.fact in current(after)
    assert after[only_id(known)].fact == f"{subject} {thing} {old}"


@SETTINGS
@given(subject=SUBJECTS, predicate=PREDICATES, variant=st.integers(0, 3), negated=st.booleans())
def test_restatements_always_merge(
    subject: str, predicate: str, variant: int, negated: bool
) -> None:
    """Case, punctuation and spacing never make a new fact."""
    before = f"{subject} {negate(predicate) if negated else predicate}"
    known = stored(before)
    after, outcome = learn(known, FactDecision(restated(before, variant)))
    assert outcome == "merged"
    assert current(after) == [before]
