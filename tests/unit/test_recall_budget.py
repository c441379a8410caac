"""Recall bounded by tokens, not by a number of items: every script costs what it costs."""

from __future__ import annotations

from dataclasses import replace

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.memory_block import recalled_line
from llm_bot.memory.recall_budget import LINE_OVERHEAD_TOKENS, line_tokens, within_tokens
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.memory.tokens import TiktokenCounter

COUNTER = TiktokenCounter()


def hit(entry_id: str, text: str, score: float = 0.5) -> SearchHit:
    entry = IndexEntry(
        id=entry_id,
        kind="message",
        text=text,
        speaker="Nok",
        date="2025-07-30T10:00:00+00:00",
        conversation_id="c1",
        turn=1,
        seq=0,
        source_id=entry_id,
        terms=tuple(keyword_terms(text)),
    )
    return SearchHit(entry=entry, score=score, dense=0.0, keyword=0.0)


ENGLISH = "I booked the ferry to Koh Samui for the second week of March."
THAI = "ฉันจองเรือเฟอร์รี่ไปเกาะสมุยสำหรับสัปดาห์ที่สองของเดือนมีนาคมแล้วนะ"


def test_a_line_costs_its_rendered_text_plus_the_json_overhead() -> None:
    line = "(2025-07-30 Wed, Nok) " + ENGLISH
    assert line_tokens(hit("a", ENGLISH), COUNTER.count) == (
        COUNTER.count(line) + LINE_OVERHEAD_TOKENS
    )


def test_the_estimate_is_the_rendered_line_whatever_the_weekday() -> None:
    for day in range(1, 8):
        found = hit("a", THAI)
        dated = replace(found, entry=replace(found.entry, date=f"2025-09-0{day}T08:00:00+07:00"))
        entry = dated.entry
        rendered = recalled_line(entry.text, entry.date, entry.speaker)
        assert line_tokens(dated, COUNTER.count) == COUNTER.count(rendered) + LINE_OVERHEAD_TOKENS


def test_hits_are_kept_best_first_while_their_lines_fit() -> None:
    hits = [hit(f"e{n}", f"{ENGLISH} ({n})") for n in range(50)]
    cost = line_tokens(hits[0], COUNTER.count)
    kept = within_tokens(hits, 10 * cost + cost // 2, COUNTER.count)
    assert [h.entry.id for h in kept] == [f"e{n}" for n in range(10)]
    assert within_tokens(hits, 10_000, COUNTER.count) == hits
    assert within_tokens(hits, cost - 1, COUNTER.count) == []


def test_the_same_budget_holds_fewer_lines_of_a_costlier_script() -> None:
    budget = 400
    english = within_tokens([hit(f"e{n}", ENGLISH) for n in range(100)], budget, COUNTER.count)
    thai = within_tokens([hit(f"t{n}", THAI) for n in range(100)], budget, COUNTER.count)
    assert 0 < len(thai) < len(english) < 100
    for kept in (english, thai):
        spent = sum(line_tokens(h, COUNTER.count) for h in kept)
        assert spent <= budget < spent + line_tokens(kept[0], COUNTER.count)


def test_counting_stops_at_the_first_hit_that_does_not_fit() -> None:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return 10

    within_tokens([hit(f"e{n}", f"{ENGLISH} ({n})") for n in range(100)], 35, count)
    assert len(counted) == 3


def test_a_line_is_counted_once_however_often_it_comes_back() -> None:
    """Searches return the same entries again and again: a line's count is remembered."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return 10

    hits = [hit("e1", "The ferry leaves at nine (remembered)")] * 5
    assert within_tokens(hits, 1_000, count) == hits
    assert within_tokens(hits, 1_000, count) == hits
    assert len(counted) == 1
