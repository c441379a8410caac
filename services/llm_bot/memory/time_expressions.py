"""Time expressions in a message, resolved to periods of days (SPEC 5.7): English and Thai.

"What did I buy last Saturday?", "in May 2022", "two weeks ago", "เมื่อวาน", "เดือนที่แล้ว":
each names a period, resolved against the message's own ``created_at`` (the day it was
written, in its own UTC offset), as a :class:`Period` of whole days. A period is as
coarse as what was said: "May 2022" is the whole month, "last week" Monday to Sunday of
the week before, "two weeks ago" the week around that day, "on Friday" the latest Friday
before the message. Without a year, a month or day means its latest occurrence not after
the message (people ask about the past). Thai years in the Buddhist era (พ.ศ. 2566) are
read as 2023.

Why rules and not ``dateparser``: measured 2026-11-25 (dateparser 1.5.0), its
``search_dates`` finds no expression in unsegmented Thai ("ฉันไปเที่ยวที่ไหนเมื่อวาน":
none), returns instants rather than periods ("in May 2022" → 30 May 2022) and costs 2-5 ms
per message on the reply path; the forms here are the common ones and cost ~0.05 ms.

:func:`asks_when` tells a question about when something happened or for how long ("When
did ...?", "What time ...", "How many days before ...", "How long has ...?", "เมื่อไหร่",
"นานแค่ไหน"; not "how old was I when ..."): what answers it is a message that can date the
event or measure it, one that says when or how long (:func:`mentions_time`: a date, a
weekday, "yesterday", a clock time, "for 4 years", "since I was 17") besides the date it
was written.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan", "มกราคม", "ม.ค."),
            ("february", "feb", "กุมภาพันธ์", "ก.พ."),
            ("march", "mar", "มีนาคม", "มี.ค."),
            ("april", "apr", "เมษายน", "เม.ย."),
            ("may", "พฤษภาคม", "พ.ค."),
            ("june", "jun", "มิถุนายน", "มิ.ย."),
            ("july", "jul", "กรกฎาคม", "ก.ค."),
            ("august", "aug", "สิงหาคม", "ส.ค."),
            ("september", "sep", "sept", "กันยายน", "ก.ย."),
            ("october", "oct", "ตุลาคม", "ต.ค."),
            ("november", "nov", "พฤศจิกายน", "พ.ย."),
            ("december", "dec", "ธันวาคม", "ธ.ค."),
        ),
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: number
    for number, names in enumerate(
        (
            ("monday", "วันจันทร์"),
            ("tuesday", "วันอังคาร"),
            ("wednesday", "วันพุธ"),
            ("thursday", "วันพฤหัสบดี", "วันพฤหัส"),
            ("friday", "วันศุกร์"),
            ("saturday", "วันเสาร์"),
            ("sunday", "วันอาทิตย์"),
        )
    )
    for name in names
}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a few": 3, "several": 3,
    "หนึ่ง": 1, "สอง": 2, "สาม": 3, "สี่": 4, "ห้า": 5, "หก": 6, "เจ็ด": 7, "แปด": 8,
    "เก้า": 9, "สิบ": 10, "สองสาม": 3,
}  # fmt: skip
UNITS = {
    "day": "day", "days": "day", "วัน": "day",
    "week": "week", "weeks": "week", "สัปดาห์": "week", "อาทิตย์": "week",
    "month": "month", "months": "month", "เดือน": "month",
    "year": "year", "years": "year", "ปี": "year",
}  # fmt: skip
_PRONOUNS = frozenset(("i", "we", "you", "he", "she", "they", "it", "this", "that", "be"))
BUDDHIST_ERA_OFFSET = 543
"""Thai years: พ.ศ. 2566 is 2023."""


@dataclass(frozen=True, order=True)
class Period:
    """Days ``first`` to ``last``, both included."""

    first: date
    last: date

    def holds(self, day: date) -> bool:
        return self.first <= day <= self.last


def _alternatives(names: Iterable[str]) -> str:
    """A regex alternation of ``names``, longest first (so "มีนาคม" wins over "มี")."""
    return "|".join(re.escape(n) for n in sorted(names, key=lambda n: -len(n)))


_MONTH = _alternatives(MONTHS)
_WEEKDAY = _alternatives(WEEKDAYS)
_NUMBER = rf"\d{{1,3}}|{_alternatives(NUMBERS)}"
_UNIT = _alternatives(UNITS)
_YEAR = r"(?:พ\.ศ\.\s*)?(?:19|20|24|25)\d\d"
_ISO = re.compile(r"\b((?:19|20)\d\d)[-/](\d{1,2})[-/](\d{1,2})\b")
_DAY_MONTH = re.compile(
    rf"(?<![A-Za-z0-9.])(\d{{1,2}})(?:st|nd|rd|th)?\s*(?:of\s+)?({_MONTH})(?![a-z])\.?,?\s*({_YEAR})?",
    re.IGNORECASE,
)
_MONTH_DAY = re.compile(
    rf"(?<![A-Za-z0-9.])({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?!\d)(?:,?\s*({_YEAR}))?",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"(?<![A-Za-z0-9.])({_MONTH})(?![a-z])\.?,?\s*(?:of\s+)?({_YEAR})?", re.I)
_YEAR_ALONE = re.compile(rf"(?<![\d/-])({_YEAR})(?![\d/-])")
_AGO = re.compile(
    rf"(?<![\w])({_NUMBER})\s*({_UNIT})\s*(?:ago|back|ก่อน|ที่แล้ว|ที่ผ่านมา)", re.IGNORECASE
)
_LAST_UNIT = re.compile(
    r"\b(last|this|past|previous)\s+(week|weekend|month|year)\b"
    r"|(สัปดาห์|อาทิตย์|เดือน|ปี)(ที่แล้ว|ก่อน|ที่ผ่านมา|นี้)|(ปีกลาย)",
    re.IGNORECASE,
)
_WEEKDAY_MENTION = re.compile(rf"\b(?:(last|this|on|past)\s+)?({_WEEKDAY})(ที่แล้ว|นี้)?", re.I)
_DAY_WORDS = {
    "the day before yesterday": 2,
    "yesterday": 1,
    "last night": 1,
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "เมื่อวานซืน": 2,
    "เมื่อวาน": 1,
    "เมื่อคืน": 1,
    "วันนี้": 0,
    "คืนนี้": 0,
    "เมื่อเช้า": 0,
}
_DAY_WORD = re.compile(rf"(?<![a-z])({_alternatives(_DAY_WORDS)})(?![a-z])", re.IGNORECASE)
_WHEN = re.compile(
    r"(?:^|[.?!,;:]\s*)(?:and |so |but )?when\b"  # "When did ...?", not "how old was I when"
    r"|\b(?:what|which) (?:date|day|time|year|month)\b|\bhow long\b|\bsince when\b"
    r"|\bhow many (?:days|weeks|months|years)\b(?! (?:a|per|each|every)\b)"
    r"|เมื่อไหร่|เมื่อไร|ตอนไหน|วันไหน|วันที่เท่าไ|ปีไหน|เดือนไหน|นานแค่ไหน|นานเท่าไ|กี่โมง",
    re.IGNORECASE,
)
_COUNTED = _alternatives(n for n, value in NUMBERS.items() if value > 1)
"""Numbers a span is counted in: "two days" measures time, "a day" may not ("have a good
day")."""
_DURATION = re.compile(
    rf"(?<![A-Za-z0-9])(?:\d{{1,3}}|{_COUNTED})\s*(?:{_UNIT})(?![a-z])"
    r"|\bfor (?:years|months|weeks|ages|a while|a long time)\b"
    r"|\bsince (?:i|we|he|she|they) (?:was|were)\b",
    re.IGNORECASE,
)
_FORMS = (_ISO, _DAY_MONTH, _MONTH_DAY, _AGO, _LAST_UNIT, _WEEKDAY_MENTION, _DAY_WORD, _DURATION)
_ANY_TIME = re.compile(
    "|".join(p.pattern for p in _FORMS)
    + r"|\b(?:19|20)\d\d\b|\b(?:last|next|this) (?:summer|winter|spring|fall|time)\b"
    + r"|\b\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)(?!\w)|\b\d{1,2}:\d\d\b|\d\s*(?:โมง|นาฬิกา)"
    + rf"|\b(?:in|since|during|early|late|mid|until|by)[ -](?:{_MONTH})\b",
    re.IGNORECASE,
)


def asks_when(text: str) -> bool:
    """Whether ``text`` asks when something happened."""
    return _WHEN.search(text) is not None


@functools.lru_cache(maxsize=16384)
def mentions_time(text: str) -> bool:
    """Whether ``text`` says when something happened or for how long (a date, month,
    weekday, "yesterday", "last week", "two months ago", "for 4 years", "สามปี", ...): a
    message that can date or measure an event."""
    return _ANY_TIME.search(text) is not None


def periods(text: str, created_at: datetime | date) -> list[Period]:
    """The periods ``text`` names, resolved against ``created_at``; sorted, no repeats."""
    today = created_at.date() if isinstance(created_at, datetime) else created_at
    found = _Found()
    _absolute(text, today, found)
    _relative(text, today, found)
    return sorted(found.periods)


class _Found:
    """Periods found so far, and the spans of text they came from (an expression read as
    one form is not read again as a shorter one: "May 8th, 2021" is not also "2021")."""

    def __init__(self) -> None:
        self.periods: set[Period] = set()
        self._spans: list[tuple[int, int]] = []

    def add(self, match: re.Match[str], period: Period | None) -> None:
        if period is not None and period.first <= period.last:
            self.periods.add(period)
        self._spans.append(match.span())

    def free(self, match: re.Match[str]) -> bool:
        start, end = match.span()
        return all(end <= s or start >= e for s, e in self._spans)


def _absolute(text: str, today: date, found: _Found) -> None:
    """Dates, days of a month, months and years."""
    for match in _ISO.finditer(text):
        found.add(match, _day(int(match[1]), int(match[2]), int(match[3])))
    for pattern, day_group, month_group in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for match in pattern.finditer(text):
            if found.free(match):
                month, day = MONTHS[match[month_group].lower()], int(match[day_group])
                found.add(match, _dated(today, month, day, _year(match[3])))
    for match in _MONTH_YEAR.finditer(text):
        if found.free(match) and (match[2] or not _is_may_verb(text, match)):
            found.add(match, _month(today, MONTHS[match[1].lower()], _year(match[2])))
    for match in _YEAR_ALONE.finditer(text):
        if found.free(match):
            year = _year(match[1])
            found.add(match, Period(date(year, 1, 1), date(year, 12, 31)) if year else None)


def _relative(text: str, today: date, found: _Found) -> None:
    """Relative forms: "N units ago", weekdays, "last week/month/year", "yesterday" and their Thai forms."""
    for match in _AGO.finditer(text):
        count = NUMBERS.get(match[1].lower()) or int(match[1])
        found.add(match, _ago(today, count, match[2]))
    for match in _WEEKDAY_MENTION.finditer(text):
        if found.free(match):
            found.add(match, _weekday(today, WEEKDAYS[match[2].lower()], match[1], match[3]))
    for match in _LAST_UNIT.finditer(text):
        if found.free(match):
            found.add(match, _named_unit(today, match))
    for match in _DAY_WORD.finditer(text):
        day = today - timedelta(days=_DAY_WORDS[match[1].lower()])
        found.add(match, Period(day, day))


def _is_may_verb(text: str, match: re.Match[str]) -> bool:
    """ "may" as in "you may know" or "May I ask", not the month (a month name without a
    year or day)."""
    if match[1].lower() != "may":
        return False
    following = text[match.end(1) :].split(maxsplit=1)
    return text[match.start(1)].islower() or (bool(following) and following[0].lower() in _PRONOUNS)


def _year(text: str | None) -> int | None:
    if not text:
        return None
    year = int(re.sub(r"\D", "", text))
    return year - BUDDHIST_ERA_OFFSET if year >= 2400 else year  # BE years


def _day(year: int, month: int, day: int) -> Period | None:
    try:
        found = date(year, month, day)
    except ValueError:
        return None
    return Period(found, found)


def _dated(today: date, month: int, day: int, year: int | None) -> Period | None:
    if year is not None:
        return _day(year, month, day)
    for candidate in (today.year, today.year - 1):
        period = _day(candidate, month, day)
        if period is not None and period.first <= today:
            return period
    return None


def _month(today: date, month: int, year: int | None) -> Period:
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return Period(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def _months_back(today: date, months: int) -> Period:
    index = today.year * 12 + today.month - 1 - months
    return _month(today, index % 12 + 1, index // 12)


def _week_of(day: date) -> Period:
    monday = day - timedelta(days=day.weekday())
    return Period(monday, monday + timedelta(days=6))


def _ago(today: date, count: int, unit_name: str) -> Period:
    unit = UNITS[unit_name.lower()]
    if unit == "day":
        day = today - timedelta(days=count)
        return Period(day - timedelta(days=1), day + timedelta(days=1))
    if unit == "week":
        day = today - timedelta(weeks=count)
        return Period(day - timedelta(days=3), day + timedelta(days=3))
    if unit == "month":
        return _months_back(today, count)
    year = today.year - count
    return Period(date(year, 1, 1), date(year, 12, 31))


def _named_unit(today: date, match: re.Match[str]) -> Period:
    english, thai = match[1], match[3]
    if match[5]:  # ปีกลาย: last year
        unit, back = "year", 1
    elif english:
        unit, back = match[2].lower(), 0 if english.lower() == "this" else 1
    else:
        unit = UNITS[thai]
        back = 0 if match[4] == "นี้" else 1
    if unit == "week":
        return _week_of(today - timedelta(weeks=back))
    if unit == "weekend":
        saturday = _week_of(today - timedelta(weeks=back)).first + timedelta(days=5)
        return Period(saturday, saturday + timedelta(days=1))
    if unit == "month":
        return _months_back(today, back)
    year = today.year - back
    return Period(date(year, 1, 1), date(year, 12, 31))


def _weekday(today: date, weekday: int, english: str | None, thai: str | None) -> Period:
    """The latest such day before ``today``; "last Friday" said on a Saturday is the day
    before (the usual reading), "this Friday" may be today."""
    back = (today.weekday() - weekday) % 7
    if back == 0 and not ((english or "").lower() == "this" or thai == "นี้"):
        back = 7
    day = today - timedelta(days=back)
    return Period(day, day)


__all__ = ["Period", "asks_when", "mentions_time", "periods"]
