"""Index entries built from messages and long-term items."""

from __future__ import annotations

from dataclasses import replace

from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.long_term import SemanticFact
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_items import (
    changed_long_term_entries,
    conversation_entries,
    long_term_entry,
    message_entries,
    passages,
    sentences_of,
)


def message(content: str, *, name: str | None = None, role: str = "user") -> ChatMessage:
    return ChatMessage(
        id="evt1:user",
        role=role,
        content=content,
        created_at="2023-05-08T13:56:00+00:00",
        turn=3,
        seq=0,
        event_id="evt1",
        name=name,
    )


def test_message_entry_keeps_date_speaker_and_turn() -> None:
    """The unit of recall carries what the prompt shows: date, speaker name, turn."""
    (entry,) = message_entries(
        "c1", message("I went to the support group", name="Caroline"), indexed_at=1.0
    )
    assert entry.id == "m|c1|evt1:user"
    assert (entry.speaker, entry.date, entry.turn, entry.source_id) == (
        "Caroline",
        "2023-05-08T13:56:00+00:00",
        3,
        "evt1:user",
    )
    assert "carolin" in entry.terms
    assert entry.embedding_text == "Caroline: I went to the support group"


def test_filler_and_empty_messages_are_not_indexed() -> None:
    """ "ok", "555", "ครับ" and emoji carry nothing worth recalling."""
    for text in ("ok", "555", "ครับ", "👍", "   "):
        assert message_entries("c1", message(text), indexed_at=0) == []


def test_long_messages_split_into_passages() -> None:
    """Each passage is an entry of its own with a distinct stable id."""
    text = " ".join(f"Sentence number {n} is here." for n in range(100))
    entries = message_entries("c1", message(text), indexed_at=0)
    assert len(entries) > 1
    assert len({e.id for e in entries}) == len(entries)
    assert " ".join(e.text for e in entries) == text


def test_passages_cut_unbroken_text() -> None:
    """Text without sentence ends or spaces is still cut to the limit."""
    parts = passages("x" * 2500, limit=1000)
    assert [len(p) for p in parts] == [1000, 1000, 500]


def test_digest_changes_with_text_only() -> None:
    """Re-embedding is needed when the text changes, not when the time of indexing does."""
    a = message_entries("c1", message("hello there friend"), indexed_at=1)[0]
    b = message_entries("c1", message("hello there friend"), indexed_at=2)[0]
    c = message_entries("c1", message("goodbye friend"), indexed_at=1)[0]
    assert a.digest == b.digest != c.digest


def test_long_term_fact_entry() -> None:
    """A fact is an entry of kind facts keyed by its id; a blank one is none."""
    fact = SemanticFact(
        id="f1",
        fact="Prefers delivery on weekends.",
        confidence=0.9,
        salience=0.7,
        created_at="2025-01-01",
        updated_at="2025-01-01",
    )
    entry = long_term_entry(fact, indexed_at=0)
    assert entry is not None
    assert (entry.id, entry.kind, entry.source_id) == ("l|facts|f1", "facts", "f1")
    assert long_term_entry(fact.model_copy(update={"fact": "  "}), indexed_at=0) is None


def test_entries_carry_their_neighbours_words() -> None:
    """A reply is found by the words of the question it answers, and the other way round;
    messages of turns before ``first_turn`` are context only."""
    q = message("Where did you go hiking last weekend?").model_copy(
        update={"id": "e1:user", "turn": 1}
    )
    a = message("Up to the waterfall near Chiang Mai!", role="assistant").model_copy(
        update={"id": "e1:assistant", "turn": 1, "seq": 1}
    )
    nxt = message("Sounds lovely").model_copy(update={"id": "e2:user", "turn": 2})
    entries = conversation_entries("c1", [q, a, nxt], indexed_at=0, first_turn=1)
    by_source = {e.source_id: e for e in entries}
    assert "hike" in by_source["e1:assistant"].terms
    assert "waterfal" in by_source["e1:user"].terms
    later = conversation_entries("c1", [q, a, nxt], indexed_at=0, first_turn=2)
    assert [e.source_id for e in later] == ["e2:user"]
    assert "waterfal" in later[0].terms


def test_a_message_of_several_sentences_is_embedded_whole_and_by_sentence() -> None:
    """Its own text first, then each sentence that is not filler, the speaker leading."""
    (entry,) = message_entries(
        "c1",
        message("Thanks! We went camping. The kids loved the meteor shower!", name="Melanie"),
        indexed_at=1.0,
    )
    assert entry.embedding_texts == (
        "Melanie: Thanks! We went camping. The kids loved the meteor shower!",
        "Melanie: We went camping.",
        "Melanie: The kids loved the meteor shower!",
    )


def test_list_numbers_cut_off_as_sentences_get_no_embedding() -> None:
    """ "2." alone (a list item's number, cut at its full stop) is not a sentence of its own."""
    (entry,) = message_entries(
        "c1",
        message("Try these: 1. Visit the museum. 2. **3. Walk by the river.", role="assistant"),
        indexed_at=1.0,
    )
    assert entry.embedding_texts == (
        "assistant: Try these: 1. Visit the museum. 2. **3. Walk by the river.",
        "assistant: Try these: 1.",
        "assistant: Visit the museum.",
        "assistant: Walk by the river.",
    )


def test_one_sentence_besides_filler_is_embedded_once() -> None:
    """A single sentence (with or without filler around it) has nothing to add."""
    for text in (
        "We went camping last week",
        "Thanks! We went camping.",
        "Cool! See you at the lake",
    ):
        (entry,) = message_entries("c1", message(text, name="Mel"), indexed_at=1.0)
        assert entry.embedding_texts == (entry.embedding_text,), text


def test_long_term_items_are_embedded_by_sentence_without_a_speaker() -> None:
    """A fact of two sentences: whole, then each (no speaker to lead)."""
    fact = SemanticFact(
        id="f1",
        fact="Likes hiking. Owns a red bicycle.",
        salience=0.5,
        confidence=0.9,
        created_at="2023-05-08T13:56:00+00:00",
        updated_at="2023-05-08T13:56:00+00:00",
    )
    entry = long_term_entry(fact, indexed_at=1.0)
    assert entry is not None
    assert entry.embedding_texts == (
        "Likes hiking. Owns a red bicycle.",
        "Likes hiking.",
        "Owns a red bicycle.",
    )


def test_thai_sentences_end_at_the_spaces_between_thai_letters() -> None:
    """Thai writes no space between words and no full stop: a space between Thai letters
    ends a sentence or phrase; a number keeps the words around it."""
    text = "โอเคค่ะ ขอถามอีกเรื่อง งบของฉันสำหรับเรื่องนี้คือ 300 บาทค่ะ\nIs that ok? Yes."
    assert sentences_of(text) == [
        "โอเคค่ะ",
        "ขอถามอีกเรื่อง",
        "งบของฉันสำหรับเรื่องนี้คือ 300 บาทค่ะ",
        "Is that ok?",
        "Yes.",
    ]


def test_a_speaker_leads_only_text_of_its_own_script() -> None:
    """A Latin label ("user") before a Thai sentence would pull the multilingual model's
    vector away from what it says; a Thai name leads Thai text; an English text keeps its
    Latin speaker; a Thai name before English text (unreadable to the English model) does
    not lead it. Sentence by sentence as for the whole text."""
    thai = "ขอถามอีกเรื่อง งบของฉันสำหรับเรื่องนี้คือ 300 บาทค่ะ"
    (by_role,) = message_entries("c1", message(thai), indexed_at=1.0)
    assert by_role.embedding_texts == (thai, "ขอถามอีกเรื่อง", "งบของฉันสำหรับเรื่องนี้คือ 300 บาทค่ะ")
    (by_thai_name,) = message_entries("c1", message(thai, name="แอน"), indexed_at=1.0)
    assert by_thai_name.embedding_text == f"แอน: {thai}"
    (english,) = message_entries("c1", message("We went camping", name="แอน"), indexed_at=1.0)
    assert english.embedding_text == "We went camping"
    (latin,) = message_entries("c1", message("We went camping", name="Ann"), indexed_at=1.0)
    assert latin.embedding_text == "Ann: We went camping"


def test_whether_an_entry_says_when_is_read_from_its_text_unless_stored() -> None:
    """``says_when``: the stored answer when the index stored one, else its text's."""
    (dated,) = message_entries("c1", message("I went there yesterday"), indexed_at=1.0)
    (undated,) = message_entries("c1", message("I went to the support group"), indexed_at=1.0)
    assert dated.dating is None
    assert (dated.says_when, undated.says_when) == (True, False)
    assert replace(dated, dating=False).says_when is False
    assert replace(undated, dating=True).says_when is True
    assert replace(dated, dating=False) == dated  # not part of what the entry is


def test_conversation_entries_terms_are_each_message_s_own_and_its_neighbours() -> None:
    """Each message's terms are computed once and reused (its entries, its neighbours'
    context); what an entry holds is what one computation per entry gives: the speaker's
    and the passage's terms, then the words of the messages just before and after it."""
    long_text = " ".join(f"Passage {n} talks about hiking near Chiang Mai." for n in range(40))
    texts = ["ok", "ไปเที่ยวเชียงใหม่เมื่อวานครับ", long_text, "Which trail was it?", "thanks!"]
    messages = [
        message(text, role="user" if n % 2 == 0 else "assistant").model_copy(
            update={"id": f"e{n}", "turn": 1 + n // 2, "seq": n % 2}
        )
        for n, text in enumerate(texts)
    ]
    for first_turn in (1, 2):
        entries = conversation_entries("c1", messages, indexed_at=0, first_turn=first_turn)
        expected = []
        for index, said in enumerate(messages):
            if said.turn < first_turn:
                continue
            neighbours = messages[max(0, index - 1) : index] + messages[index + 1 : index + 2]
            context = [t for n in neighbours for t in keyword_terms(n.content)]
            expected += [
                [*keyword_terms(f"{said.role} {e.text}"), *context]
                for e in message_entries("c1", said, indexed_at=0)
            ]
        assert [list(e.terms) for e in entries] == expected
        assert len(entries) == len(expected) > 0
    assert sum(1 for e in entries if e.source_id == "e2") > 1  # the long one: passages


def test_changed_long_term_entries_are_the_full_entries_of_changed_items() -> None:
    """Each item's entry id is wanted; only those whose digest the index does not hold
    come back, each exactly the item's :func:`long_term_entry` (keyword terms included);
    blank and superseded items have none."""

    def fact(n: int, text: str, **update: str) -> SemanticFact:
        return SemanticFact(
            id=f"f{n}",
            fact=text,
            confidence=0.9,
            salience=0.7,
            created_at="2025-01-01",
            updated_at="2025-01-01",
        ).model_copy(update=update)

    same, edited, new = (
        fact(1, "Likes tea."),
        fact(2, "Lives in Lisbon now."),
        fact(3, "Has a cat."),
    )
    items = [same, edited, new, fact(4, "  "), fact(5, "Lived in Porto.", superseded_by="f2")]
    entries = {item.id: long_term_entry(item, indexed_at=5.0) for item in items}
    assert entries["f4"] is None
    assert entries["f5"] is None
    unchanged = entries["f1"]
    assert unchanged is not None
    stored = {"l|facts|f1": unchanged.digest, "l|facts|f2": "0000", "l|facts|f9": "1111"}
    wanted, changed = changed_long_term_entries(items, stored, indexed_at=5.0)
    assert wanted == {"l|facts|f1", "l|facts|f2", "l|facts|f3"}
    assert changed == [entries["f2"], entries["f3"]]
    assert [list(e.terms) for e in changed] == [["live", "lisbon", "now"], ["cat"]]
