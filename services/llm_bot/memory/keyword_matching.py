"""Matching of the keyword tables against text, and filler detection (SPEC 5.5, 5.7).

Text and cues are compared after NFKC normalisation and case folding (NFKC matters for
Thai: it splits SARA AM, as in แนะนำ). English cues are whole words or phrases (any run of
whitespace between words); Thai has no spaces between words, so Thai cues are substrings
of the text with its whitespace removed. A message of Thai politeness particles and
greetings alone is filler (:func:`is_filler`, which also decides when retrieval is
skipped, SPEC 5.7). Particles are not stripped before matching, because they occur inside
words (แนะนำ contains นะ, คะแนน contains คะ).

Everything here is pure: no I/O, no clock, no randomness. Compiled regexes are cached.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Final

from llm_bot.memory.filler_words import FILLER_ENGLISH, FILLER_THAI, THAI_PARTICLES
from llm_bot.memory.keyword_rules import KeywordRule

_LAUGHTER = re.compile(r"(?<!\d)(?:5{3,}|\u0e55{3,})(?!\d)|(?<![a-z])(?:ha|he|ah){2,}h?(?![a-z])")
VARIATION_SELECTORS = frozenset(chr(code) for code in range(0xFE00, 0xFE10))
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------


def normalise(text: str) -> str:
    """NFKC, casefolded, typographic apostrophes made plain, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_QUOTES)
    return " ".join(folded.split())


def compact(normalised: str) -> str:
    return "".join(normalised.split())


_NEVER: Final = re.compile(r"(?!)")


def english_regex(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Whole words or phrases; Latin-letter boundaries, so Thai next to a word still ends it."""
    if not phrases:
        return _NEVER
    ordered = sorted({normalise(p) for p in phrases}, key=len, reverse=True)
    words = (r"\s+".join(re.escape(word) for word in phrase.split()) for phrase in ordered)
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(words) + r")(?![a-z0-9])")


def thai_regex(thai: tuple[str, ...]) -> re.Pattern[str]:
    """Substrings (longest first), matched against the whitespace-free text."""
    if not thai:
        return _NEVER
    ordered = sorted({compact(normalise(s)) for s in thai}, key=len, reverse=True)
    return re.compile("|".join(re.escape(s) for s in ordered))


@functools.cache
def compiled_cues(
    english: tuple[str, ...], thai: tuple[str, ...], patterns: tuple[str, ...]
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The regexes of one cue set: on the normalised text, and on the whitespace-free text."""
    english_re = english_regex(english)
    if patterns:
        nfkc = [unicodedata.normalize("NFKC", pattern) for pattern in patterns]
        english_re = re.compile("|".join([english_re.pattern, *nfkc]))
    return english_re, thai_regex(thai)


@dataclass(frozen=True, slots=True)
class PreparedText:
    normalised: str
    compact: str

    @classmethod
    def of(cls, text: str) -> PreparedText:
        normalised = normalise(text)
        return cls(normalised, compact(normalised))

    def matches(
        self, english: tuple[str, ...], thai: tuple[str, ...] = (), patterns: tuple[str, ...] = ()
    ) -> bool:
        on_normalised, on_compact = compiled_cues(english, thai, patterns)
        return bool(on_normalised.search(self.normalised) or on_compact.search(self.compact))

    def matches_rule(self, rule: KeywordRule) -> bool:
        return self.matches(rule.english, rule.thai, rule.patterns)


# ---------------------------------------------------------------------------
# Filler
# ---------------------------------------------------------------------------


def _is_noise(char: str) -> bool:
    """Whitespace, punctuation, symbols (emoji) and invisible joiners/modifiers."""
    if char.isspace() or char in VARIATION_SELECTORS:
        return True
    return unicodedata.category(char)[0] in {"P", "S"} or unicodedata.category(char) == "Cf"


@functools.cache
def _filler_english_regex() -> re.Pattern[str]:
    return english_regex(FILLER_ENGLISH)


_ELONGATED_LATIN = re.compile(r"([a-z])\1{2,}")
# Thai elongation repeats the last letter ("ครับบบ", "ค่าาา"): a doubled letter at the end of
# a Thai run, or any letter three times or more. "โอเคค่ะ" keeps its two ค (a word boundary).
_ELONGATED_THAI = re.compile(r"([\u0e01-\u0e4e])\1+(?![\u0e01-\u0e4e])|([\u0e01-\u0e4e])\2{2,}")


def _collapse_thai_elongation(text: str) -> str:
    return _ELONGATED_THAI.sub(lambda match: match.group(1) or match.group(2), text)


_THAI_FILLER_LONGEST_FIRST: Final = tuple(
    sorted({normalise(s) for s in (*FILLER_THAI, *THAI_PARTICLES)}, key=len, reverse=True)
)


def is_filler(text: str) -> bool:
    """True when the text is only greetings, thanks, acknowledgements, laughter, particles,
    emoji and punctuation ("ok", "thanks", "555", "ครับ", "👍", "hi"); also for empty text.

    Such turns carry nothing worth remembering or retrieving (SPEC 5.7). Elongations
    ("okkk", "ค่าาา") count as their short form.
    """
    residue = _LAUGHTER.sub(" ", normalise(text))
    residue = _ELONGATED_LATIN.sub(r"\1", residue)
    residue = _filler_english_regex().sub(" ", residue)
    residue = _collapse_thai_elongation(residue)
    for phrase in _THAI_FILLER_LONGEST_FIRST:
        residue = residue.replace(phrase, " ")
    return all(_is_noise(char) for char in residue)


__all__ = [
    "VARIATION_SELECTORS",
    "PreparedText",
    "compact",
    "compiled_cues",
    "english_regex",
    "is_filler",
    "normalise",
    "thai_regex",
]
