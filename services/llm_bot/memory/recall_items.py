"""What retrieval stores and returns (SPEC 5.7): index entries, queries and hits.

The unit of recall is one message (long messages split into passages) or one long-term
item, with its date, speaker and place in the conversation. Entries are built from memory
by pure functions here; the worker embeds and stores them (``service/indexer.py``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from llm_bot.memory.keyword_matching import is_filler
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.long_term import EpisodicSummary, NotableEvent, SemanticFact
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.scripts import mostly_latin
from llm_bot.memory.time_expressions import mentions_time

EntryKind = Literal["message", "facts", "episodes", "events"]

SEPARATOR = "|"
"""Between the parts of an entry id: ``m|<conversation>|<message id>[#<passage>]`` or
``l|<kind>|<item id>``. Ids (conversation, event) cannot hold ``|``, so the parts read
back unambiguously and an id prefix names exactly one conversation."""
MESSAGE_PREFIX = f"m{SEPARATOR}"
LONG_TERM_PREFIX = f"l{SEPARATOR}"


def conversation_prefix(conversation_id: str) -> str:
    """The id prefix of the entries of one conversation's messages."""
    return f"{MESSAGE_PREFIX}{conversation_id}{SEPARATOR}"


def conversation_of(entry_id: str) -> str | None:
    """The conversation of a message entry's id (None for a long-term entry)."""
    if not entry_id.startswith(MESSAGE_PREFIX):
        return None
    return entry_id.split(SEPARATOR, 2)[1]


PASSAGE_CHARS = 800
"""Messages longer than this are split into passages at sentence ends, each at most about
this long (a passage is what the embedding model reads; MiniLM-class models read ~256
word pieces, about 1,000 characters of English)."""


@dataclass(frozen=True)
class IndexEntry:
    """One unit of recall.

    ``id`` is stable (the same message or item always gets the same id), so indexing is
    idempotent; ``source_id`` is the message id (``ChatMessage.id``) or long-term item id
    it came from, so what is already in the window can be left out of a search.
    ``digest`` changes when the text does (a restated fact re-embeds).
    """

    id: str
    kind: EntryKind
    text: str
    speaker: str
    date: str
    conversation_id: str
    turn: int
    seq: int
    source_id: str
    terms: tuple[str, ...] = field(repr=False)
    indexed_at: float = 0.0
    dating: bool | None = field(default=None, compare=False, repr=False)
    """Whether the text says when something happened or for how long, as the index stored
    it when it wrote the entry (:attr:`says_when`); None: not stored."""

    @property
    def says_when(self) -> bool:
        """Whether the text says when something happened or for how long
        (``time_expressions.mentions_time``): the stored answer when there is one, so a
        process loading a user's index does not read every text again (~0.3 ms for a
        1,000-character message: most of a cold load's time)."""
        return mentions_time(self.text) if self.dating is None else self.dating

    @property
    def digest(self) -> str:
        return text_digest(self.embedding_text)

    @property
    def embedding_text(self) -> str:
        """What the embedding model reads: the speaker's name leads, as questions name
        people ("What did Caroline paint?"), when it is written in the text's script
        (:meth:`_spoken`)."""
        return self._spoken(self.text)

    @property
    def embedding_texts(self) -> tuple[str, ...]:
        """Every text of the entry that gets an embedding: :attr:`embedding_text` first,
        then, when the text has two or more sentences that are not filler, each of them
        (speaker leading). The entry's dense score is the best cosine among them
        (``hybrid_search.py``): one sentence of a long message can answer a question
        that the whole message, about several things, barely resembles. A "sentence"
        without a letter is not one: mostly the number of a list item cut off by
        :func:`sentences_of` ("2.", "**3."), a sixth of the sentences of LongMemEval's
        assistant answers, whose embeddings would say nothing but who speaks."""
        sentences = [s for s in sentences_of(self.text) if _has_letters(s) and not is_filler(s)]
        if len(sentences) < 2:
            return (self.embedding_text,)
        return (self.embedding_text, *(self._spoken(s) for s in sentences))

    def _spoken(self, text: str) -> str:
        """``text`` with the speaker's name leading, unless the name is written in another
        script than the text: a Latin label ("user", "assistant", "Ann") before a Thai
        sentence pulls the multilingual model's vector away from what the sentence says
        (the cosine of "what is my budget?" with "my budget for this is 300 baht", both in
        Thai: 0.30 with "user: " leading, 0.44 without), and a Thai name is unreadable to
        the English model. A question names a person in the script it is written in."""
        if self.speaker and mostly_latin(self.speaker) == mostly_latin(text):
            return f"{self.speaker}: {text}"
        return text


def _has_letters(text: str) -> bool:
    return any(char.isalpha() for char in text)


def text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def speaker_of(message: ChatMessage) -> str:
    """The display name when the message has one, else its role."""
    return message.name or message.role


_SENTENCE_END = re.compile(
    r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+|(?<=[\u0e00-\u0e7f])\s+(?=[\u0e00-\u0e7f])"
)


def sentences_of(text: str) -> list[str]:
    """The sentences of ``text`` (cut after ``.``, ``!``, ``?`` and their CJK forms, at
    line breaks, and at a space between Thai letters: Thai writes no space between words
    and no full stop, a space ends a sentence or phrase), stripped; none blank."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def passages(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """``text`` in passages of at most about ``limit`` characters, cut at sentence ends
    (a sentence longer than ``limit`` is cut at spaces, or hard when it has none)."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    pieces: list[str] = []
    current = ""
    for sentence in sentences_of(text):
        for chunk in _hard_cut(sentence, limit):
            if current and len(current) + 1 + len(chunk) > limit:
                pieces.append(current)
                current = chunk
            else:
                current = f"{current} {chunk}" if current else chunk
    if current:
        pieces.append(current)
    return pieces


def _hard_cut(sentence: str, limit: int) -> Iterator[str]:
    while len(sentence) > limit:
        cut = sentence.rfind(" ", 0, limit)
        cut = cut if cut > limit // 2 else limit
        yield sentence[:cut].strip()
        sentence = sentence[cut:].strip()
    if sentence:
        yield sentence


def message_entries(
    conversation_id: str,
    message: ChatMessage,
    *,
    indexed_at: float,
    neighbours: Sequence[ChatMessage] = (),
) -> list[IndexEntry]:
    """The entries of one recorded message: none for filler and empty messages (nothing
    worth recalling), one per passage otherwise.

    Keyword terms are the speaker's name, the passage's words and the words of the
    ``neighbours`` (the messages just before and after it in the conversation): a reply
    ("Yes, last Friday!") is found by the words of the question it answers, a question by
    its answer's. The embedding reads the passage alone."""
    context = tuple(term for n in neighbours for term in keyword_terms(n.content))
    return _message_entries(conversation_id, message, indexed_at=indexed_at, context=context)


def _message_entries(
    conversation_id: str,
    message: ChatMessage,
    *,
    indexed_at: float,
    context: tuple[str, ...],
    own: Sequence[str] | None = None,
) -> list[IndexEntry]:
    """:func:`message_entries` with the neighbours' terms given (``context``), and the
    message's own (``own``: ``keyword_terms(message.content)``) when known: a one-passage
    message's terms are then not computed again. A passage's terms are its speaker's and
    its text's; terms never span a space (``keyword_terms``), so ``keyword_terms(f"{speaker}
    {part}")`` is the speaker's terms followed by the part's."""
    if message.role == "system" or is_filler(message.content):
        return []
    speaker = speaker_of(message)
    parts = passages(message.content)
    named = keyword_terms(speaker)
    return [
        IndexEntry(
            id=conversation_prefix(conversation_id)
            + message.id
            + (f"#{n}" if len(parts) > 1 else ""),
            kind="message",
            text=part,
            speaker=speaker,
            date=message.created_at,
            conversation_id=conversation_id,
            turn=message.turn,
            seq=message.seq,
            source_id=message.id,
            terms=(
                *named,
                *(own if own is not None and len(parts) == 1 else keyword_terms(part)),
                *context,
            ),
            indexed_at=indexed_at,
        )
        for n, part in enumerate(parts)
    ]


def conversation_entries(
    conversation_id: str,
    messages: Sequence[ChatMessage],
    *,
    indexed_at: float,
    first_turn: int = 1,
) -> list[IndexEntry]:
    """The entries of ``messages`` (one conversation, in order) of turns ``first_turn`` and
    later, each with its neighbours' words (:func:`message_entries`). Messages of earlier
    turns serve as context only. Each message's keyword terms are computed once, for its
    own entry and as its two neighbours' context (three times before: ~0.6 ms of the
    memory worker's event loop per LongMemEval message)."""
    spoken = [m for m in messages if m.role != "system" and m.content.strip()]
    first = next((i for i, m in enumerate(spoken) if m.turn >= first_turn), len(spoken))
    terms = [keyword_terms(m.content) for m in spoken[max(0, first - 1) :]]
    offset = max(0, first - 1)
    entries: list[IndexEntry] = []
    for index, message in enumerate(spoken):
        if message.turn < first_turn:
            continue
        near = range(max(offset, index - 1), min(len(spoken), index + 2))
        context = tuple(t for i in near if i != index for t in terms[i - offset])
        entries.extend(
            _message_entries(
                conversation_id,
                message,
                indexed_at=indexed_at,
                context=context,
                own=terms[index - offset],
            )
        )
    return entries


LongTermItem = SemanticFact | EpisodicSummary | NotableEvent


def long_term_entry_id(kind: str, item_id: str) -> str:
    """The index entry id of the long-term item ``item_id`` of ``kind``."""
    return f"{LONG_TERM_PREFIX}{kind}{SEPARATOR}{item_id}"


def long_term_entry_ids(removed: Mapping[str, Sequence[str]]) -> list[str]:
    """The entry ids of long-term items that left memory (kind → ids; profile attributes
    have no entries)."""
    return [
        long_term_entry_id(kind, item_id)
        for kind, ids in removed.items()
        if kind != "profile"
        for item_id in ids
    ]


def long_term_entry(item: LongTermItem, *, indexed_at: float) -> IndexEntry | None:
    """The entry of a fact, episode or notable event (None when its text is blank, or for a
    superseded fact: a correction's old value is never recalled)."""
    entry = _unworded_entry(item, indexed_at=indexed_at)
    return None if entry is None else _worded(entry)


def changed_long_term_entries(
    items: Sequence[LongTermItem], stored: Mapping[str, str], *, indexed_at: float
) -> tuple[set[str], list[IndexEntry]]:
    """The entry ids of ``items`` (:func:`long_term_entry`), and their entries whose digest
    is not the one ``stored`` (entry id → digest) holds. Only those get their keyword
    terms: every job compares all of a user's long-term items with the index, and the
    terms of the unchanged ones cost the memory worker ~3 % of its event loop for
    nothing."""
    wanted: set[str] = set()
    changed: list[IndexEntry] = []
    for item in items:
        entry = _unworded_entry(item, indexed_at=indexed_at)
        if entry is None:
            continue
        wanted.add(entry.id)
        if stored.get(entry.id) != entry.digest:
            changed.append(_worded(entry))
    return wanted, changed


def _worded(entry: IndexEntry) -> IndexEntry:
    return replace(entry, terms=tuple(keyword_terms(entry.text)))


def _unworded_entry(item: LongTermItem, *, indexed_at: float) -> IndexEntry | None:
    """:func:`long_term_entry` without its keyword terms (its digest does not read them)."""
    if isinstance(item, SemanticFact):
        if item.superseded_by is not None:
            return None
        kind: EntryKind = "facts"
        text, conversation, turn = item.fact, "", 0
    elif isinstance(item, EpisodicSummary):
        kind, text = "episodes", item.summary
        conversation, turn = item.conversation_id, min(item.turns, default=0)
    else:
        kind, text = "events", item.summary
        conversation, turn = item.conversation_id, item.turn
    text = " ".join(text.split())
    if not text:
        return None
    return IndexEntry(
        id=long_term_entry_id(kind, item.id),
        kind=kind,
        text=text,
        speaker="",
        date=item.created_at,
        conversation_id=conversation,
        turn=turn,
        seq=0,
        source_id=item.id,
        terms=(),
        indexed_at=indexed_at,
    )


@dataclass(frozen=True)
class SearchHit:
    """An entry found for a query, with its fused relevance in [0, 1]."""

    entry: IndexEntry
    score: float
    dense: float
    """Cosine similarity of query and entry (0 when below the minimum or not computed)."""
    keyword: float
    """BM25 score of the entry for the query's terms (0 when none matched)."""
    feedback: float = 0.0
    """BM25 score of the entry for the words relevance feedback added to the query's
    (0 when none matched). A hit has a keyword score, a cosine at or above the minimum,
    or this: what found it relevant (``ranking.found_by``)."""
