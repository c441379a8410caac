"""Long-term memory retention (SPEC 5.5): fact deduplication, eviction, the recall bundle."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_bot.memory.fact_updates import (
    RESTATEMENT_SIMILARITY,
    FactDecision,
    apply_fact,
    similarity,
)
from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
    Source,
    normalize_fact,
    stable_id,
)
from llm_bot.memory.retention import (
    BUNDLE_EPISODES,
    BUNDLE_EVENTS,
    BUNDLE_FACTS,
    BUNDLE_PROFILE,
    Scored,
    score,
    select_bundle,
    to_evict,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIRST = Source(conversation_id="c1", turns=(1, 2), event_ids=("e1",))
SECOND = Source(conversation_id="c2", turns=(7,), event_ids=("e9",))
T1 = "2025-07-01T10:00:00+00:00"
T2 = "2025-07-20T10:00:00+00:00"


def day(n: int) -> str:
    """An ISO timestamp on day ``n`` of 2025 (1-based), all in one format."""
    return f"2025-{1 + (n - 1) // 28:02d}-{1 + (n - 1) % 28:02d}T00:00:00+00:00"


def learn(
    existing: list[SemanticFact],
    text: str,
    *,
    source: Source = FIRST,
    now: str = T1,
    confidence: float = 0.6,
    tags: tuple[str, ...] = ("contact",),
    salience: float = 0.5,
) -> SemanticFact:
    """``apply_fact`` of a new fact (action ``add``) with defaults for the arguments a test
    does not vary: the fact it leaves current."""
    return apply_fact(
        {f.id: f for f in existing},
        FactDecision(fact=text, tags=tags, confidence=confidence),
        salience=salience,
        source=source,
        now=now,
    ).current


def fact(
    item_id: str, created_at: str, *, salience: float = 0.5, confidence: float = 1.0
) -> SemanticFact:
    """A semantic fact with the given score inputs and age."""
    return SemanticFact(
        id=item_id,
        fact=f"fact {item_id}",
        confidence=confidence,
        salience=salience,
        created_at=created_at,
        updated_at=created_at,
    )


def episode(item_id: str, created_at: str, *, salience: float = 0.5) -> EpisodicSummary:
    """An episodic summary with the given salience and age."""
    return EpisodicSummary(
        id=item_id,
        conversation_id="c1",
        turns=(1,),
        summary=f"episode {item_id}",
        salience=salience,
        created_at=created_at,
    )


def event(item_id: str, created_at: str, *, importance: float = 0.5) -> NotableEvent:
    """A notable event with the given importance and age."""
    return NotableEvent(
        id=item_id,
        event_type="INQUIRY",
        importance=importance,
        summary=f"event {item_id}",
        conversation_id="c1",
        turn=1,
        event_id=f"ev-{item_id}",
        created_at=created_at,
    )


# --- restatements (apply_fact) ----------------------------------------------------------------------


def test_a_new_fact_gets_a_stable_id_and_its_provenance() -> None:
    """A fact nobody stated before is new: a deterministic id, its source, now twice."""
    first = learn([], "  The user prefers email contact. ", tags=("contact", "email", "contact"))
    again = learn([], "  The user prefers email contact. ", tags=("contact", "email", "contact"))
    assert first == again
    assert first.id == stable_id("fact", normalize_fact("The user prefers email contact."))
    assert first.fact == "The user prefers email contact."
    assert first.tags == ("contact", "email")
    assert first.sources == (FIRST,)
    assert first.created_at == first.updated_at == T1
    assert (first.confidence, first.salience) == (0.6, 0.5)


@pytest.mark.parametrize(
    ("original", "restated"),
    [
        ("The user prefers email contact.", "the USER prefers EMAIL contact"),
        ("The user prefers email contact.", "The user prefers email-contact!!"),
        ("The user prefers email contact.", "  The user   prefers\temail contact  "),
        ("The user prefers email contact.", "User prefers email contact"),
        ("The user lives in Chiang Mai, Thailand.", "The user lives in Chiang Mai."),
        ("ลูกค้าชอบสีแดง", "ลูกค้าชอบสีแดง!"),
        ("ลูกค้าชอบสีแดง", "ลูกค้าชอบสีแดงมาก"),
        ("ลูกค้าชอบสีแดง", "ลูกค้าชอบ สีแดง"),
        ("ลูกค้าต้องการใบกำกับภาษี", "ลูกค้าต้องการใบกำกับภาษีทุกครั้ง"),
    ],
    ids=[
        "case",
        "punctuation",
        "spacing",
        "paraphrase",
        "paraphrase-shorter",
        "thai-punctuation",
        "thai-paraphrase",
        "thai-spacing",
        "thai-paraphrase-longer",
    ],
)
def test_a_restatement_updates_the_existing_fact(original: str, restated: str) -> None:
    """Same id and text, higher confidence, merged sources and tags, updated_at moved."""
    existing = learn([], original, tags=("contact",), confidence=0.6, salience=0.4)
    updated = learn(
        [existing], restated, source=SECOND, now=T2, tags=("email",), confidence=0.5, salience=0.7
    )
    assert updated.id == existing.id
    assert updated.fact == existing.fact
    assert existing.confidence < updated.confidence <= 1.0
    assert updated.salience == 0.7
    assert updated.sources == (FIRST, SECOND)
    assert updated.tags == ("contact", "email")
    assert updated.created_at == T1
    assert updated.updated_at == T2


def test_a_close_paraphrase_sits_above_the_similarity_threshold() -> None:
    """The paraphrases used above clear RESTATEMENT_SIMILARITY; unrelated facts do not."""
    assert similarity("The user prefers email contact.", "User prefers email contact") >= (
        RESTATEMENT_SIMILARITY
    )
    assert similarity("ลูกค้าชอบสีแดง", "ลูกค้าชอบสีแดงมาก") >= RESTATEMENT_SIMILARITY
    assert similarity("The user prefers email", "The user is vegetarian") < RESTATEMENT_SIMILARITY


def test_confidence_rises_but_never_above_one() -> None:
    """Repeated restatements from new sources raise confidence monotonically up to 1."""
    current = learn([], "The user is vegetarian.", confidence=0.9)
    for n in range(60):
        source = Source(conversation_id=f"c{n + 10}", turns=(n + 1,))
        following = learn([current], "the user is vegetarian", source=source, confidence=1.0)
        assert current.confidence <= following.confidence <= 1.0
        current = following
    assert current.confidence == 1.0
    assert len(current.sources) == 61


def test_the_same_source_again_changes_nothing() -> None:
    """Re-running the same compaction returns the stored fact unchanged."""
    existing = learn([], "The user prefers email contact.")
    again = learn([existing], "user prefers email contact", now=T2, tags=("other",), confidence=1.0)
    assert again == existing


def test_a_different_fact_gets_a_new_id() -> None:
    """An unrelated fact is not merged into an existing one."""
    existing = learn([], "The user prefers email contact.")
    other = learn([existing], "The user is allergic to peanuts.", source=SECOND, now=T2)
    assert other.id != existing.id
    assert other.sources == (SECOND,)
    assert other.created_at == T2


def test_thai_facts_differing_in_a_vowel_or_tone_mark_stay_apart() -> None:
    """Thai vowel and tone marks are letters, not punctuation: "mat" is not "tiger"."""
    assert normalize_fact("ชอบเสือ") != normalize_fact("ชอบเสื่อ")
    tigers = learn([], "ชอบเสือ")
    mats = learn([tigers], "ชอบเสื่อ", source=SECOND, now=T2)
    assert mats.id != tigers.id
    assert mats.fact == "ชอบเสื่อ"


def test_a_restatement_merges_into_the_most_similar_fact() -> None:
    """An exact (normalised) match wins over a merely similar fact listed first."""
    similar = learn([], "The user prefers email contact today.")
    exact = learn([], "The user prefers email contact.")
    merged = learn([similar, exact], "the user prefers email contact", source=SECOND, now=T2)
    assert merged.id == exact.id


# --- to_evict ---------------------------------------------------------------------------


def test_items_older_than_the_cutoff_always_go() -> None:
    """Expired items are evicted even when few and highly scored."""
    items = [
        fact("old", day(1), salience=1.0),
        fact("edge", day(10)),
        fact("new", day(20), salience=0.1),
    ]
    assert to_evict(items, max_items=100, cutoff_iso=day(10)) == ["old"]


def test_retention_counts_from_when_memory_was_recorded_not_from_when_it_happened() -> None:
    """Imported history of long ago is kept as long as live memory: an episode or event
    about day 1 recorded on day 20 lives from day 20; without ``recorded_at`` (stored before
    the field existed), from its ``created_at``."""
    imported: list[SemanticFact | EpisodicSummary | NotableEvent] = [
        episode("ep", day(1)).model_copy(update={"recorded_at": day(20)}),
        event("ev", day(1)).model_copy(update={"recorded_at": day(20)}),
        episode("legacy", day(1)),
    ]
    assert to_evict(imported, max_items=100, cutoff_iso=day(10)) == ["legacy"]


@pytest.mark.parametrize(
    ("low", "mid", "high"),
    [
        (
            fact("low", day(5), salience=0.9, confidence=0.2),
            fact("mid", day(3), salience=0.5, confidence=0.8),
            fact("high", day(1), salience=0.6, confidence=0.9),
        ),
        (
            event("low", day(5), importance=0.2),
            event("mid", day(3), importance=0.5),
            event("high", day(1), importance=0.9),
        ),
        (
            episode("low", day(5), salience=0.2),
            episode("mid", day(3), salience=0.5),
            episode("high", day(1), salience=0.9),
        ),
    ],
    ids=["facts", "events", "episodes"],
)
def test_beyond_max_items_the_least_salient_go_first(
    low: Scored, mid: Scored, high: Scored
) -> None:
    """Facts rank by salience*confidence, events by importance, episodes by salience."""
    assert score(low) < score(mid) < score(high)
    items = [mid, high, low]
    assert to_evict(items, max_items=2, cutoff_iso=day(1)) == ["low"]
    assert to_evict(items, max_items=1, cutoff_iso=day(1)) == ["mid", "low"]
    assert to_evict(items, max_items=3, cutoff_iso=day(1)) == []


def test_on_equal_score_the_oldest_go_first() -> None:
    """Among equally salient items the oldest is evicted first, then by id."""
    items = [
        event("b", day(4)),
        event("newest", day(9)),
        event("oldest", day(2)),
        event("a", day(4)),
    ]
    assert to_evict(items, max_items=2, cutoff_iso=day(1)) == ["b", "oldest"]
    assert to_evict(items, max_items=1, cutoff_iso=day(1)) == ["a", "b", "oldest"]


def test_eviction_is_deterministic_whatever_the_input_order() -> None:
    """The same items in any order evict the same ids."""
    items = [event(f"e{n}", day(1 + n % 5), importance=(n % 3) / 2) for n in range(12)]
    expected = set(to_evict(items, max_items=5, cutoff_iso=day(2)))
    shuffler = random.Random(3)
    for _ in range(20):
        shuffled = list(items)
        shuffler.shuffle(shuffled)
        assert set(to_evict(shuffled, max_items=5, cutoff_iso=day(2))) == expected
    assert to_evict(items, max_items=5, cutoff_iso=day(2)) == to_evict(
        items, max_items=5, cutoff_iso=day(2)
    )


# --- select_bundle ----------------------------------------------------------------------


def test_bundle_limits_and_orders_each_kind() -> None:
    """Profile by key, facts by score, latest episodes, most important recent events."""
    profile = [
        ProfileAttribute(key=f"k{n:02d}", value=str(n), updated_at=T1) for n in reversed(range(25))
    ]
    facts = [fact(f"f{n:02d}", T1, salience=(n % 10) / 10) for n in range(30)]
    episodes = [episode(f"p{n}", day(n + 1)) for n in reversed(range(8))]
    events = [
        event("minor-new", day(9), importance=0.3),
        event("major-old", day(1), importance=0.9),
        event("major-new", day(8), importance=0.9),
        event("mid-a", day(5), importance=0.6),
        event("mid-b", day(5), importance=0.6),
        event("mid-old", day(2), importance=0.6),
        event("low", day(9), importance=0.1),
    ]
    bundle = select_bundle(profile=profile, facts=facts, episodes=episodes, events=events)
    assert [a.key for a in bundle.profile] == [f"k{n:02d}" for n in range(BUNDLE_PROFILE)]
    assert len(bundle.facts) == BUNDLE_FACTS
    fact_scores = [score(f) for f in bundle.facts]
    assert fact_scores == sorted(fact_scores, reverse=True)
    assert min(fact_scores) >= max(score(f) for f in facts if f not in bundle.facts)
    assert [e.id for e in bundle.episodes] == [f"p{n}" for n in range(3, 8)]
    assert len(bundle.episodes) == BUNDLE_EPISODES
    assert [e.id for e in bundle.events] == ["major-new", "major-old", "mid-a", "mid-b", "mid-old"]
    assert len(bundle.events) == BUNDLE_EVENTS


def test_bundle_of_nothing_is_empty() -> None:
    """No items give an empty bundle."""
    bundle = select_bundle(profile=[], facts=[], episodes=[], events=[])
    assert bundle.item_count() == 0


# --- properties -------------------------------------------------------------------------

_LEVELS = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])


@st.composite
def scored_items(draw: st.DrawFn) -> list[Scored]:
    """Up to 16 items of one kind, with few distinct scores and ages so ties are common."""
    kind = draw(st.sampled_from(["facts", "episodes", "events"]))
    count = draw(st.integers(min_value=0, max_value=16))
    items: list[Scored] = []
    for n in range(count):
        created = day(draw(st.integers(min_value=1, max_value=8)))
        if kind == "facts":
            items.append(fact(f"i{n}", created, salience=draw(_LEVELS), confidence=draw(_LEVELS)))
        elif kind == "episodes":
            items.append(episode(f"i{n}", created, salience=draw(_LEVELS)))
        else:
            items.append(event(f"i{n}", created, importance=draw(_LEVELS)))
    return items


@SETTINGS
@given(
    scored_items(),
    st.integers(min_value=0, max_value=12),
    st.integers(min_value=1, max_value=9),
    st.randoms(use_true_random=False),
)
def test_eviction_keeps_at_most_max_items_and_the_best_of_them(
    items: list[Scored], max_items: int, cutoff_day: int, shuffler: random.Random
) -> None:
    """Expired items go, at most max_items stay, and no kept item ranks below an evicted one."""
    cutoff = day(cutoff_day)
    evicted = to_evict(items, max_items=max_items, cutoff_iso=cutoff)
    assert len(evicted) == len(set(evicted))
    gone = set(evicted)
    alive = [i for i in items if i.created_at >= cutoff]
    kept = [i for i in items if i.id not in gone]
    assert all(i.id in gone for i in items if i.created_at < cutoff)
    assert len(kept) == min(max_items, len(alive))
    for out in (i for i in alive if i.id in gone):
        for stay in kept:
            assert (score(out), out.created_at) <= (score(stay), stay.created_at)
    shuffled = list(items)
    shuffler.shuffle(shuffled)
    assert set(to_evict(shuffled, max_items=max_items, cutoff_iso=cutoff)) == gone


@SETTINGS
@given(
    st.text(alphabet="abc กขคเสือ่้ ุ.!", min_size=1, max_size=30),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_restating_keeps_confidence_within_bounds(text: str, first: float, second: float) -> None:
    """Restating any fact never lowers its confidence nor takes it above 1."""
    existing = learn([], text, confidence=first)
    updated = learn([existing], text, source=SECOND, now=T2, confidence=second)
    assert updated.id == existing.id
    assert existing.confidence <= updated.confidence <= 1.0
