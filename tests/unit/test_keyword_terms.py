"""Keyword terms for the keyword half of retrieval."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_bot.memory.keyword_terms import keyword_terms


def test_english_words_are_stemmed_and_stopwords_dropped() -> None:
    """Inflections meet on one stem; function words and possessives carry no topic."""
    assert keyword_terms("Caroline's paintings were painted") == ["carolin", "paint", "paint"]
    assert keyword_terms("What did you do with it?") == []


def test_numbers_are_kept_verbatim() -> None:
    """Order numbers and amounts match exactly."""
    assert keyword_terms("Order #4471 costs 300 baht") == ["order", "4471", "cost", "300", "baht"]


def test_thai_becomes_character_bigrams() -> None:
    """Thai has no spaces between words: a query shares bigrams with text containing its words."""
    text = keyword_terms("อยากได้ราคาสินค้านี้ครับ")
    query = keyword_terms("ราคาสินค้า")
    assert set(query) <= set(text)
    assert not set(keyword_terms("อากาศดี")) & set(query)


def test_cjk_and_single_characters() -> None:
    """Unspaced CJK runs become bigrams; a lone character stays a unigram."""
    assert keyword_terms("東京") == ["東京"]
    assert keyword_terms("猫") == ["猫"]


def test_emoji_and_punctuation_produce_nothing() -> None:
    """Symbols are not terms."""
    assert keyword_terms("👍🎉 !!! ...") == []


@given(st.text(max_size=200))
def test_terms_are_deterministic_and_spaceless(text: str) -> None:
    """Any text gives the same terms twice, none empty and none containing whitespace
    (the Redis index stores them space-separated)."""
    terms = keyword_terms(text)
    assert terms == keyword_terms(text)
    assert all(term and not any(c.isspace() for c in term) for term in terms)


@settings(max_examples=300)
@given(st.text(max_size=40), st.text(max_size=200))
def test_terms_never_span_a_space(speaker: str, text: str) -> None:
    """A speaker's name before a text adds the name's terms and changes none of the
    text's: index entries reuse a message's terms for its entry and as its neighbours'
    context (``conversation_entries``) rather than computing them again."""
    assert keyword_terms(f"{speaker} {text}") == keyword_terms(speaker) + keyword_terms(text)
