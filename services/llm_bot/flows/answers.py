"""Deterministic reading of a flow's answers (SPEC 5.10): numbers in digits and words,
yes/no, choices and exit intents, in English and Thai, before any model is asked.

Each reader returns an :class:`Answer`: ``value`` when the text answers the question
unambiguously, ``ambiguous`` when it may but says two things ("6 or 7", "yes... no") and
the model's structured output may settle it, neither when it does not answer at all (the
question is asked again).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_THAI_DIGITS = str.maketrans("๐๑๒๓๔๕๖๗๘๙", "0123456789")
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "ศูนย์": 0, "หนึ่ง": 1, "สอง": 2, "สาม": 3, "สี่": 4, "ห้า": 5, "หก": 6,
    "เจ็ด": 7, "แปด": 8, "เก้า": 9, "สิบ": 10,
}  # fmt: skip
_THAI_WORDS = sorted((w for w in _NUMBER_WORDS if not w.isascii()), key=len, reverse=True)
_OUT_OF = re.compile(r"(\d+)\s*(?:/|out of|จาก|เต็ม)\s*(\d+)")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)?")
_WORD = re.compile(r"[a-z]+")

_YES = ("yes", "yeah", "yep", "yup", "sure", "of course", "definitely", "i did", "i do",
        "correct", "right", "ok", "okay", "ใช่", "ครับ", "ค่ะ", "คะ", "ได้", "เคย", "มี")  # fmt: skip
_NO = ("no", "nope", "nah", "not really", "never", "i didn't", "i did not", "i don't",
       "i do not", "not at all", "ไม่", "ไม่ใช่", "ไม่ได้", "ไม่เคย", "ไม่มี")  # fmt: skip
_EXIT = ("stop", "quit", "exit", "cancel", "bye", "goodbye", "enough", "i want to stop",
         "no more questions", "ไม่ทำแล้ว", "พอแล้ว", "หยุด", "เลิก", "บาย", "ยกเลิก")  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """What a reply says to a question."""

    value: int | bool | str | None = None
    ambiguous: bool = False

    @property
    def answered(self) -> bool:
        return self.value is not None


NOT_ANSWERED = Answer()
AMBIGUOUS = Answer(ambiguous=True)


def normalized(text: str) -> str:
    """Lowercase, NFKC, Thai digits as ASCII, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).translate(_THAI_DIGITS).casefold()
    return " ".join(folded.split())


def read_scale(text: str, low: int = 1, high: int = 10) -> Answer:
    """A whole number in ``low..high``: "7", "7/10", "seven", "เจ็ด", "๗"; a number out of
    range, or a fraction, is no answer; two different numbers are ambiguous."""
    clean = normalized(text)
    out_of = _OUT_OF.search(clean)
    if out_of is not None and int(out_of[2]) == high:
        clean = clean.replace(out_of[0], out_of[1])
    found: list[float] = [float(d.replace(",", ".")) for d in _DIGITS.findall(clean)]
    found += [_NUMBER_WORDS[w] for w in _WORD.findall(clean) if w in _NUMBER_WORDS]
    rest = clean
    for word in _THAI_WORDS:
        while word in rest:
            found.append(_NUMBER_WORDS[word])
            rest = rest.replace(word, " ", 1)
    distinct = set(found)
    if len(distinct) > 1:
        return AMBIGUOUS
    if not distinct:
        return NOT_ANSWERED
    (number,) = distinct
    if number != int(number) or not low <= number <= high:
        return NOT_ANSWERED
    return Answer(int(number))


def read_boolean(text: str) -> Answer:
    """Yes or no, in English or Thai; both at once is ambiguous. Thai negation wins over
    the polite particle that follows it ("ไม่ครับ" is no)."""
    clean = normalized(text)
    no = _mentions(clean, _NO)
    if any(word in clean for word in ("ไม่", "มิได้")):
        no = True
        clean = re.sub(r"ไม่\S*", " ", clean)
        # what is left may say yes too ("ใช่", "yes"), but a polite particle does not
        yes = _words(
            clean, ("ใช่", "ได้", "เคย", *(w for w in _YES if w.isascii())), ascii_only=False
        )
    else:
        yes = _mentions(clean, _YES)
    if yes and no:
        return AMBIGUOUS
    if yes or no:
        return Answer(yes)
    return NOT_ANSWERED


def read_choice(text: str, options: Sequence[str]) -> Answer:
    """One of ``options``: named (case and spacing aside), or by its number (1-based);
    naming two is ambiguous."""
    clean = normalized(text)
    named = [o for o in options if normalized(o) and _contains(clean, normalized(o))]
    # "green tea" named also names "tea": an option inside another named one does not count
    named = [
        o
        for o in named
        if not any(p != o and _contains(normalized(p), normalized(o)) for p in named)
    ]
    if len(named) == 1:
        return Answer(named[0])
    if len(named) > 1:
        return AMBIGUOUS
    numbers = {int(d) for d in re.findall(r"\b\d+\b", clean)}
    if len(numbers) == 1 and 1 <= (n := next(iter(numbers))) <= len(options):
        return Answer(options[n - 1])
    return AMBIGUOUS if len(numbers) > 1 else NOT_ANSWERED


def read_text(text: str) -> Answer:
    """Any non-blank reply."""
    stripped = " ".join(text.split())
    return Answer(stripped) if stripped else NOT_ANSWERED


def wants_to_exit(text: str, extra: Sequence[str] = ()) -> bool:
    """Whether the reply asks to stop the questionnaire ("stop", "bye", "ไม่ทำแล้ว"), or
    says one of a flow's own ``extra`` exit intents."""
    return _mentions(normalized(text), (*_EXIT, *extra))


def _mentions(clean: str, phrases: Sequence[str]) -> bool:
    return _words(clean, phrases, ascii_only=False)


def _words(clean: str, phrases: Sequence[str], *, ascii_only: bool) -> bool:
    for phrase in map(normalized, phrases):  # NFKC splits Thai sara am as the text's was
        if phrase.isascii():
            if re.search(rf"(?<![a-z']){re.escape(phrase)}(?![a-z'])", clean):
                return True
        elif not ascii_only and phrase in clean:
            return True
    return False


def _contains(haystack: str, needle: str) -> bool:
    if needle.isascii():
        return re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])", haystack) is not None
    return needle in haystack
