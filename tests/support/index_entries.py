"""Index entries for tests of the search (``memory/hybrid_search.py``)."""

from __future__ import annotations

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry


def entry(
    entry_id: str, text: str, *, source: str | None = None, speaker: str = "user"
) -> IndexEntry:
    """A message entry of conversation c1, turn 1, its terms those of ``speaker text``."""
    return IndexEntry(
        id=entry_id,
        kind="message",
        text=text,
        speaker=speaker,
        date="2025-07-30T10:00:00+00:00",
        conversation_id="c1",
        turn=1,
        seq=0,
        source_id=source or entry_id,
        terms=tuple(keyword_terms(f"{speaker} {text}")),
    )
