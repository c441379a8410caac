"""Time in the ranking: entries dated within the periods a message names, and entries that
can date an event when the message asks when."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.ranking import restricted_ranking
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.scoring import day_number
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.time_expressions import asks_when, periods
from tests.support.embeddings import hashed_vector

ASKED = datetime.fromisoformat("2023-05-30T20:00:00+07:00")


def entry(entry_id: str, text: str, day: str) -> IndexEntry:
    return IndexEntry(
        id=entry_id,
        kind="message",
        text=text,
        speaker="user",
        date=f"{day}T10:00:00+07:00",
        conversation_id=f"c-{day}",
        turn=1,
        seq=0,
        source_id=entry_id,
        terms=tuple(keyword_terms(f"user {text}")),
    )


def snapshot_of(*entries: IndexEntry) -> IndexSnapshot:
    index = IndexSnapshot()
    index.upsert((e, hashed_vector(e.text)) for e in entries)
    return index


def query_for(text: str, *, timed: bool = True, limit: int = 3) -> SearchQuery:
    return SearchQuery(
        vector=hashed_vector(text),
        terms=keyword_terms(text),
        limit=limit,
        periods=periods(text, ASKED) if timed else (),
        asks_when=timed and asks_when(text),
    )


# Many dinners, one of them last week; the question names the week, not the dish.
DINNERS = [
    entry(f"d{n}", f"What we cook for dinner: dinner number {n}.", f"2023-0{m}-10")
    for n, m in enumerate((1, 2, 3, 3, 4, 4, 1, 2))
]
LAST_WEEK = entry(
    "week",
    "My sister came over with her kids and her husband, and we all made a huge green curry "
    "for a late dinner, so spicy that the kids drank three glasses of milk each.",
    "2023-05-24",
)


def test_an_entry_dated_in_the_named_period_rises() -> None:
    index = snapshot_of(*DINNERS, LAST_WEEK)
    text = "What did we cook for dinner last week?"
    untimed = [h.entry.id for h in search(index, query_for(text, timed=False, limit=9))]
    timed = [h.entry.id for h in search(index, query_for(text, limit=9))]
    assert untimed.index("week") == len(untimed) - 1
    # above the dinners the time ranking does not find; relevance feedback's ranking (the
    # words the dinners share) keeps the dinners that match the words first
    assert timed.index("week") < untimed.index("week") - 1


def test_thai_periods_rank_the_same_way() -> None:
    index = snapshot_of(*DINNERS, LAST_WEEK)
    text = "สัปดาห์ที่แล้วเรากินอะไรเป็นมื้อเย็น dinner"
    untimed = [h.entry.id for h in search(index, query_for(text, timed=False, limit=9))]
    timed = [h.entry.id for h in search(index, query_for(text, limit=9))]
    assert timed.index("week") < untimed.index("week")


def test_a_when_question_favours_the_entry_that_dates_the_event() -> None:
    index = snapshot_of(
        entry("a", "The pottery class: I signed up, so much fun, I love the class.", "2023-03-01"),
        entry("b", "Signed up for pottery class, a pottery class is relaxing.", "2023-03-02"),
        entry(
            "c", "Guess what, yesterday I finally signed up for a new pottery class.", "2023-03-03"
        ),
    )
    text = "When did I sign up for the pottery class?"
    untimed = [h.entry.id for h in search(index, query_for(text, timed=False))]
    timed = [h.entry.id for h in search(index, query_for(text))]
    assert untimed.index("c") > 0
    assert timed[0] == "c"


def test_time_rankings_are_left_out_when_they_would_not_differ() -> None:
    """Every entry in the period, or none: the ranking is the same as without."""
    index = snapshot_of(*DINNERS)
    for text in ("What did we cook for dinner last week?", "What did we cook in 2023?"):
        timed = [h.entry.id for h in search(index, query_for(text, limit=8))]
        untimed = [h.entry.id for h in search(index, query_for(text, timed=False, limit=8))]
        assert timed == untimed
    scores = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    keep = np.ones(3, dtype=np.bool_)
    assert restricted_ranking(scores, keep, np.zeros(3, dtype=np.bool_)) is None
    assert restricted_ranking(scores, keep, keep) is None
    assert restricted_ranking(scores, keep, np.array([True, False, True])) == [2, 0]


def test_removing_an_entry_keeps_the_dates_of_the_others() -> None:
    index = snapshot_of(*DINNERS, LAST_WEEK)
    index.remove(["d0"])
    assert index.dated_within(periods("last week", ASKED)).tolist().count(True) == 1
    assert index.get("week") is not None


def test_day_number_reads_dates_and_timestamps() -> None:
    assert day_number("2023-05-24") == day_number("2023-05-24T23:59:00+07:00")
    assert day_number("") == 0
    assert day_number("yesterday") == 0
