"""What a fact asserts beyond its wording: polarity, numbers, names and places, dates.

Two texts whose words overlap a lot can still say opposite things: "The user is not
vegetarian." against "The user is vegetarian.", a phone number with other digits, "lives in
Chiang Mai" against "lives in Bangkok". :func:`contradiction` names the first such
difference, so the deterministic dedupe never merges them (the newer text must win, not
raise the old one's confidence).

- **Polarity**: the parity of negators: English (not, no, never, n't, no longer, ...), Thai
  (ไม่, มิ-, หาไม่), and the common Chinese, Japanese and Korean ones. Different parity is a
  contradiction.
- **Numbers**: digit runs in any script (Thai digits too), separators inside a number
  dropped ("081-234-5678" is one number), and the English number words two to twenty.
- **Dates**: month and weekday names, English and Thai.
- **Names and places**: capitalised words that do not start a sentence (English); scripts
  without capitals have none.

Numbers, dates and names contradict only when each text has one the other lacks: "lives in
Chiang Mai, Thailand" elaborates "lives in Chiang Mai" (it adds a value, changes none).
Pure and deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Final, Literal

Difference = Literal["negation", "number", "date", "name"]

_NEGATORS: Final = re.compile(
    r"\b(?:not|no|never|nobody|nothing|none|neither|nor|cannot|without|nowhere|"
    r"dont|doesnt|didnt|isnt|arent|wasnt|werent|cant|wont|couldnt|shouldnt|wouldnt|"
    r"hasnt|havent|hadnt|aint)\b"
    r"|n't\b"
    r"|ไม่(?![\u0e31-\u0e3a\u0e47-\u0e4e])"  # Thai "not" (ไม่ใช่, ไม่ได้, ไม่ชอบ, ...)
    r"|มิ(?:ได้|ใช่)|หาไม่"
    r"|[不没沒]|ない|ません|않|안\s"
)
_NEGATION_PHRASES: Final = re.compile(
    r"\b(?:no longer|any ?more|any longer)\b|(?<=ไม่)ได้|แล้ว|อีกต่อไป|อีกแล้ว"
)
"""What travels with a negator ("no longer", "not ... anymore", ไม่ได้ ... แล้ว)."""
_NUMBER: Final = re.compile(r"\d+(?:[.,:/\-]\d+)*")
_NUMBER_NAMES: Final = (
    "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)  # "one" is left out: too often a pronoun ("the blue one")
_NUMBER_WORDS: Final = {
    word: str(value) for value, word in enumerate(_NUMBER_NAMES.split()) if word != "_"
}
_DATE_NAMES: Final = (  # "may", "march" and "sun" left out: too often other words
    "january february april june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday "
    "friday saturday sunday weekday weekdays weekend weekends "
    "มกราคม กุมภาพันธ์ มีนาคม เมษายน พฤษภาคม มิถุนายน กรกฎาคม สิงหาคม กันยายน ตุลาคม "
    "พฤศจิกายน ธันวาคม จันทร์ อังคาร พุธ พฤหัส ศุกร์ เสาร์ อาทิตย์"
)
_DATE_WORDS: Final = frozenset(_DATE_NAMES.split())
_THAI_DATE_WORDS: Final = tuple(sorted(w for w in _DATE_WORDS if not w.isascii()))
_WORD: Final = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_SENTENCE_END: Final = re.compile(r"[.!?:;]\s*$")


@dataclass(frozen=True)
class FactValues:
    """The parts of a text that two restatements must share."""

    negated: bool
    numbers: frozenset[str]
    dates: frozenset[str]
    names: frozenset[str]
    words: frozenset[str]
    """Every word, case-folded: a "name" the other text has in lower case is a word (a
    capitalised "EMAIL" is no new name)."""


def _ascii_digits(text: str) -> str:
    """Decimal digits of any script as ASCII (๔๔๗๑ → 4471)."""
    return "".join(
        str(unicodedata.decimal(c)) if c.isdecimal() and not c.isascii() else c for c in text
    )


def fact_values(text: str) -> FactValues:
    """The polarity, numbers, dates and names of ``text``."""
    plain = _ascii_digits(unicodedata.normalize("NFKC", text)).replace("\u2019", "'")
    folded = plain.casefold()
    words = _WORD.findall(folded)
    numbers = {re.sub(r"\D", "", match) for match in _NUMBER.findall(plain)}
    numbers |= {_NUMBER_WORDS[w] for w in words if w in _NUMBER_WORDS}
    dates = {w.removesuffix("s") for w in words if w in _DATE_WORDS}  # weekends: weekend
    dates |= {w for w in _THAI_DATE_WORDS if w in folded}
    return FactValues(
        negated=len(_NEGATORS.findall(folded)) % 2 == 1,
        numbers=frozenset(numbers),
        dates=frozenset(dates),
        names=frozenset(_names(plain)),
        words=frozenset(words),
    )


def _names(text: str) -> set[str]:
    """Capitalised words that do not open a sentence (and are not "I")."""
    names: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group()
        before = text[: match.start()]
        opens_sentence = not before.strip() or bool(_SENTENCE_END.search(before))
        if word[0].isupper() and word != "I" and not opens_sentence:
            names.add(word.casefold())
    return names


def _changed(old: frozenset[str], new: frozenset[str]) -> bool:
    """Each side has a value the other lacks (a change, not an elaboration)."""
    return bool(old - new) and bool(new - old)


def without_negation(text: str) -> str:
    """``text`` with its negators and their companions removed: what it says of what, not
    whether. A negation of a stored fact reads like the fact once both pass through here."""
    folded = unicodedata.normalize("NFKC", text).replace("\u2019", "'").casefold()
    return _NEGATORS.sub(" ", _NEGATION_PHRASES.sub(" ", folded))


def _compared(old: str, new: str) -> tuple[FactValues, FactValues]:
    """Both texts' values, each one's names without the words the other has too."""
    before, after = fact_values(old), fact_values(new)
    return (
        replace(before, names=before.names - after.words),
        replace(after, names=after.names - before.words),
    )


def contradiction(old: str, new: str) -> Difference | None:
    """What ``new`` changes in what ``old`` asserts, or None when it changes nothing."""
    before, after = _compared(old, new)
    if before.negated != after.negated:
        return "negation"
    if _changed(before.numbers, after.numbers):
        return "number"
    if _changed(before.dates, after.dates):
        return "date"
    if _changed(before.names, after.names):
        return "name"
    return None


def adds_values(old: str, new: str) -> bool:
    """``new`` asserts every value of ``old`` and more (an elaboration)."""
    before, after = _compared(old, new)
    pairs = (
        (before.numbers, after.numbers),
        (before.dates, after.dates),
        (before.names, after.names),
    )
    return all(b <= a for b, a in pairs) and any(b < a for b, a in pairs)


__all__ = [
    "Difference",
    "FactValues",
    "adds_values",
    "contradiction",
    "fact_values",
    "without_negation",
]
