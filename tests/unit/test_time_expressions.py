"""Time expressions in English and Thai, resolved against the message's created_at."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from llm_bot.memory.time_expressions import Period, asks_when, mentions_time, periods

ASKED = datetime(2023, 5, 30, 23, 42, tzinfo=UTC)
"""A Tuesday."""


def days(first: str, last: str | None = None) -> Period:
    return Period(date.fromisoformat(first), date.fromisoformat(last or first))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did I buy yesterday?", [days("2023-05-29")]),
        ("the day before yesterday", [days("2023-05-28")]),
        ("What did I cook today?", [days("2023-05-30")]),
        ("What did I buy last Saturday?", [days("2023-05-27")]),
        ("What happened on Tuesday?", [days("2023-05-23")]),
        ("Where did I go last week?", [days("2023-05-22", "2023-05-28")]),
        ("this week", [days("2023-05-29", "2023-06-04")]),
        ("last weekend", [days("2023-05-27", "2023-05-28")]),
        ("What did I read last month?", [days("2023-04-01", "2023-04-30")]),
        ("last year", [days("2022-01-01", "2022-12-31")]),
        ("I started it three days ago", [days("2023-05-26", "2023-05-28")]),
        ("two weeks ago", [days("2023-05-13", "2023-05-19")]),
        ("2 months ago", [days("2023-03-01", "2023-03-31")]),
        ("a year ago", [days("2022-01-01", "2022-12-31")]),
        ("What did Caroline do in May 2022?", [days("2022-05-01", "2022-05-31")]),
        ("We met in June.", [days("2022-06-01", "2022-06-30")]),
        ("In March I moved.", [days("2023-03-01", "2023-03-31")]),
        ("on 8 May 2023", [days("2023-05-08")]),
        ("on May 8th, 2021", [days("2021-05-08")]),
        ("the 3rd of July", [days("2022-07-03")]),
        ("on 2023-04-01", [days("2023-04-01")]),
        ("in 2019", [days("2019-01-01", "2019-12-31")]),
    ],
)
def test_english_expressions_resolve_against_created_at(text: str, expected: list[Period]) -> None:
    assert periods(text, ASKED) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("เมื่อวานฉันกินอะไร", [days("2023-05-29")]),
        ("เมื่อวานซืนไปไหนมา", [days("2023-05-28")]),
        ("วันนี้ซื้ออะไร", [days("2023-05-30")]),
        ("สัปดาห์ที่แล้วฉันไปไหน", [days("2023-05-22", "2023-05-28")]),
        ("อาทิตย์ที่แล้ว", [days("2023-05-22", "2023-05-28")]),
        ("เดือนที่แล้วฉันซื้ออะไร", [days("2023-04-01", "2023-04-30")]),
        ("เดือนนี้", [days("2023-05-01", "2023-05-31")]),
        ("ปีที่แล้วไปเที่ยวที่ไหน", [days("2022-01-01", "2022-12-31")]),
        ("ปีกลาย", [days("2022-01-01", "2022-12-31")]),
        ("สามวันก่อน", [days("2023-05-26", "2023-05-28")]),
        ("2 สัปดาห์ที่แล้ว", [days("2023-05-13", "2023-05-19")]),
        ("สองเดือนก่อน", [days("2023-03-01", "2023-03-31")]),
        ("วันศุกร์ที่แล้วไปไหน", [days("2023-05-26")]),
        ("วันอาทิตย์ที่แล้ว", [days("2023-05-28")]),
        ("15 มีนาคม 2566", [days("2023-03-15")]),
        ("เดือนมกราคม พ.ศ. 2565", [days("2022-01-01", "2022-01-31")]),
    ],
)
def test_thai_expressions_resolve_against_created_at(text: str, expected: list[Period]) -> None:
    assert periods(text, ASKED) == expected


def test_the_same_words_resolve_to_other_days_when_written_on_another_day() -> None:
    later = ASKED + timedelta(days=40)
    assert periods("yesterday", later) == [days("2023-07-08")]
    assert periods("เดือนที่แล้ว", later) == [days("2023-06-01", "2023-06-30")]
    assert periods("last Saturday", later.date()) == [days("2023-07-08")]


@pytest.mark.parametrize(
    "text",
    [
        "You may know her.",
        "May I ask something?",
        "I have 2 kids and 3 dogs",
        "It costs 2,000 baht",
        "ฉันชอบกินข้าวผัด",
        "",
    ],
)
def test_text_without_a_time_expression_names_no_period(text: str) -> None:
    assert periods(text, ASKED) == []
    assert not mentions_time(text)


def test_several_expressions_give_several_periods() -> None:
    assert periods("Was it in 2021 or last month?", ASKED) == [
        days("2021-01-01", "2021-12-31"),
        days("2023-04-01", "2023-04-30"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When did Caroline go to the support group?", True),
        ("What date was the concert?", True),
        ("How long ago did I start running?", True),
        ("ไปญี่ปุ่นเมื่อไหร่", True),
        ("เริ่มเรียนวันไหน", True),
        ("How many days before the meeting did I attend the workshop?", True),
        ("So when was that?", True),
        ("What time do I wake up on Saturdays?", True),
        ("ตื่นกี่โมง", True),
        ("How long has Melanie been practicing art?", True),
        ("How long did it take to open the studio?", True),
        ("เรียนเปียโนมานานแค่ไหน", True),
        ("อยู่ที่นี่มานานเท่าไหร่แล้ว", True),
        ("What did Caroline paint?", False),
        ("How old was I when Alex was born?", False),
        ("What do I do when it rains?", False),
        ("How many days a week do I run?", False),
        ("ฉันชอบอะไร", False),
    ],
)
def test_asks_when(text: str, *, expected: bool) -> None:
    assert asks_when(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        "I went to the support group yesterday!",
        "We moved here last year.",
        "It was on 8 May 2023.",
        "Back in 2019 we had a dog.",
        "I started a new job two weeks ago.",
        "เมื่อวานไปตลาดมา",
        "I wake up at 7:30 on weekdays.",
        "The shop opens at 9 am.",
        "ตื่นตอน 6 โมงเช้า",
        "I've known these friends for 4 years.",
        "Been painting for seven years now!",
        "We've been married 5 years already.",
        "Since I was 17 or so.",
        "Since I was a kid I loved dogs.",
        "We trained for a few weeks before the race.",
        "I've wanted this for years.",
        "เรารู้จักกันมาสามปีแล้ว",
        "เรียนมา 2 เดือน",
    ],
)
def test_a_message_that_can_date_an_event_mentions_time(text: str) -> None:
    """Dates and durations: what answers "when?" and "how long?"."""
    assert mentions_time(text)


@pytest.mark.parametrize(
    "text",
    [
        "Have a good day!",
        "I have two kids and a dog.",
        "That was a great year for music, honestly.",
        "Since you asked: the blue one.",
        "ฉันชอบกินผัดไทย",
    ],
)
def test_a_message_that_says_no_time_does_not_mention_it(text: str) -> None:
    assert not mentions_time(text)
