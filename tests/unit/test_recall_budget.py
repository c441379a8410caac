"""Recall bounded by tokens, not by a number of items: every script costs what it costs."""

from __future__ import annotations

from dataclasses import replace

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.memory_block import recalled_group, recalled_line
from llm_bot.memory.memory_message import quote_json
from llm_bot.memory.recall_budget import (
    GROUP_OVERHEAD_TOKENS,
    LINE_OVERHEAD_TOKENS,
    RecalledCost,
    group_tokens,
    line_tokens,
    packed,
    within_tokens,
)
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
    assert line_tokens(hit("a", ENGLISH), COUNTER.count) == (
        COUNTER.count("Nok: " + ENGLISH) + LINE_OVERHEAD_TOKENS
    )


def test_the_estimate_is_the_rendered_group_whatever_the_weekday() -> None:
    for day in range(1, 8):
        found = hit("a", THAI)
        dated = replace(found, entry=replace(found.entry, date=f"2025-09-0{day}T08:00:00+07:00"))
        entry = dated.entry
        rendered = recalled_line(entry.text, entry.speaker)
        assert line_tokens(dated, COUNTER.count) == COUNTER.count(rendered) + LINE_OVERHEAD_TOKENS
        assert group_tokens(dated, COUNTER.count) == (
            COUNTER.count(recalled_group(entry.date)) + GROUP_OVERHEAD_TOKENS
        )


def test_the_estimates_hold_what_the_memory_message_renders() -> None:
    """A section's lines and groups as the memory message renders them cost no more than
    the estimates say (the search's bound then never overshoots what assembly counts)."""
    hits = [hit(f"e{n}", f"{ENGLISH} ({n})") for n in range(6)]
    dated = [
        replace(h, entry=replace(h.entry, date=f"2025-09-0{1 + n // 2}T08:00:00+07:00"))
        for n, h in enumerate(hits)
    ]
    cost = RecalledCost(COUNTER.count)
    estimate = 0
    for found in dated:
        estimate += cost.of(found)
        cost.add(found)
    groups: dict[str, list[str]] = {}
    for found in dated:
        line = recalled_line(found.entry.text, found.entry.speaker)
        groups.setdefault(recalled_group(found.entry.date), []).append(line)
    empty = COUNTER.count(quote_json({"recalled": {}}))
    rendered = COUNTER.count(quote_json({"recalled": groups})) - empty
    assert len(groups) == 3
    assert rendered <= estimate <= rendered + LINE_OVERHEAD_TOKENS * len(dated)


def test_a_day_s_lines_pay_for_its_group_once() -> None:
    """Recalled lines show under their date: the first line of a day pays for the date."""
    same_day = [hit(f"e{n}", ENGLISH) for n in range(3)]
    cost = RecalledCost(COUNTER.count)
    first = cost.of(same_day[0])
    cost.add(same_day[0])
    assert first == line_tokens(same_day[0], COUNTER.count) + group_tokens(
        same_day[0], COUNTER.count
    )
    assert cost.of(same_day[1]) == line_tokens(same_day[1], COUNTER.count)
    other = replace(same_day[2], entry=replace(same_day[2].entry, date="2025-08-01T00:00:00Z"))
    assert cost.of(other) == first


def test_packing_skips_what_does_not_fit_and_goes_on() -> None:
    """The simulations' packing: a line that does not fit is skipped, shorter ones after
    it still go in."""
    long_hit = hit("long", ENGLISH * 5)
    short = [hit(f"s{n}", f"short {n}") for n in range(3)]
    room = sum(RecalledCost(COUNTER.count).of(h) for h in short[:1]) + 2 * line_tokens(
        short[1], COUNTER.count
    )
    assert [h.entry.id for h in packed([long_hit, *short], room, COUNTER.count)] == [
        "s0",
        "s1",
        "s2",
    ]
    assert within_tokens([long_hit, *short], room, COUNTER.count) == []


def test_hits_are_kept_best_first_while_their_lines_fit() -> None:
    hits = [hit(f"e{n}", f"{ENGLISH} ({n})") for n in range(50)]
    cost, group = line_tokens(hits[0], COUNTER.count), group_tokens(hits[0], COUNTER.count)
    kept = within_tokens(hits, group + 10 * cost + cost // 2, COUNTER.count)
    assert [h.entry.id for h in kept] == [f"e{n}" for n in range(10)]
    assert within_tokens(hits, 10_000, COUNTER.count) == hits
    assert within_tokens(hits, group + cost - 1, COUNTER.count) == []


def test_the_same_budget_holds_fewer_lines_of_a_costlier_script() -> None:
    budget = 400
    english = within_tokens([hit(f"e{n}", ENGLISH) for n in range(100)], budget, COUNTER.count)
    thai = within_tokens([hit(f"t{n}", THAI) for n in range(100)], budget, COUNTER.count)
    assert 0 < len(thai) < len(english) < 100
    for kept in (english, thai):
        spent = group_tokens(kept[0], COUNTER.count)  # one day: one group
        spent += sum(line_tokens(h, COUNTER.count) for h in kept)
        assert spent <= budget < spent + line_tokens(kept[0], COUNTER.count)


def test_counting_stops_at_the_first_hit_that_does_not_fit() -> None:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return 10

    within_tokens([hit(f"e{n}", f"{ENGLISH} ({n})") for n in range(100)], 35, count)
    assert len(counted) == 3  # a line with its day's group (12 + 14), a line (+ 12 > 35)


def test_a_line_is_counted_once_however_often_it_comes_back() -> None:
    """Searches return the same entries again and again: a line's count is remembered."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return 10

    hits = [hit("e1", "The ferry leaves at nine (remembered)")] * 5
    assert within_tokens(hits, 1_000, count) == hits
    assert within_tokens(hits, 1_000, count) == hits
    assert counted == ["Nok: The ferry leaves at nine (remembered)", "2025-07-30 Mon"]
