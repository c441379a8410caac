"""Keyword terms of a text, for the keyword half of retrieval (SPEC 5.7).

Text is NFKC-normalised and case-folded first (:func:`keyword_matching.normalise`). Then:

- runs of Latin, Cyrillic, Greek and other spaced scripts (letters, digits, apostrophes
  inside words) become words; English stopwords are left out, possessive ``'s`` is dropped
  and every word is reduced to its Snowball (Porter 2) English stem, so "paintings",
  "painted" and "painting" meet on ``paint``. Numbers are kept as they are ("4471");
- runs of Thai, Lao, Khmer, Myanmar, CJK, kana and Hangul, written without spaces between
  words, become overlapping character bigrams of the run (a single character stays a
  unigram): no dictionary to ship, and a query shares bigrams with any text containing
  its words. Thai combining vowels and tone marks stay attached to the run.

Terms keep their repetitions (term frequency matters to BM25). Pure and deterministic.
"""

from __future__ import annotations

import functools
import re
from typing import Final

import snowballstemmer

from llm_bot.memory.keyword_matching import normalise

_UNSPACED: Final = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
)
_TOKEN: Final = re.compile(rf"([{_UNSPACED}]+)|((?:[^\W_]|(?<=[^\W_])'(?=[^\W_]))+)")

_STOPWORDS = """
a about above after again against all am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do
does doesn't doing don't down during each few for from further had hadn't has hasn't
have haven't having he he'd he'll he's her here here's hers herself him himself his how
how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out
over own same shan't she she'd she'll she's should shouldn't so some such than that
that's the their theirs them themselves then there there's these they they'd they'll
they're they've this those through to too under until up very was wasn't we we'd we'll
we're we've were weren't what what's when when's where where's which while who who's
whom why why's will with won't would wouldn't you you'd you'll you're you've your yours
yourself yourselves also just really yeah oh ok okay s t
"""
ENGLISH_STOPWORDS: Final = frozenset(_STOPWORDS.split())
"""Function words that carry no topic (the classic English list, plus chat fillers)."""


@functools.cache
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    if word.isdigit():
        return word
    return str(_stemmer().stemWord(word))


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def keyword_terms(text: str) -> list[str]:
    """The keyword terms of ``text``, in order, with repetitions."""
    terms: list[str] = []
    for unspaced, word in _TOKEN.findall(normalise(text)):
        if unspaced:
            terms.extend(_bigrams(unspaced))
            continue
        bare = word.removesuffix("'s")
        if bare not in ENGLISH_STOPWORDS:
            terms.append(_stem(bare))
    return terms


__all__ = ["ENGLISH_STOPWORDS", "keyword_terms"]
