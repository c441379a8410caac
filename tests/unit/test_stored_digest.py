"""The digest of a stored index entry, read without parsing its JSON
(``adapters/redis_recall_index.stored_digest``)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_bot.adapters.redis_recall_index import entry_json, stored_digest
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_items import message_entries


@settings(max_examples=100)
@given(st.text(min_size=1, max_size=300), st.integers(min_value=1, max_value=5))
def test_the_digest_read_in_place_is_the_parsed_one(text: str, vectors: int) -> None:
    """Whatever the text (quotes, braces, a ``"h":`` of its own), the digest read from its
    place in the stored JSON is the one the JSON holds."""
    said = ChatMessage(
        id="e1:user", role="user", content=text, created_at="2023-05-08", turn=1, seq=0
    )
    for entry in message_entries("c1", said, indexed_at=1.0):
        doc = entry_json(entry, vectors)
        assert stored_digest(doc) == stored_digest(doc.encode()) == entry.digest
        assert stored_digest(doc) == json.loads(doc)["h"]


def test_a_document_of_another_layout_is_parsed() -> None:
    """A document not led by its digest (another writer's key order) is still read."""
    assert stored_digest(json.dumps({"k": "facts", "h": "0123456789abcdef"})) == (
        "0123456789abcdef"
    )
    assert stored_digest(b'{"h":"short","k":"facts"}') == "short"
