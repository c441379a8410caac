"""The questions of a message that asks several at once (SPEC 5.7, query decomposition).

"Before I order, can you remind me what my name is, what language we speak at home, what
my order number is, which day to deliver and what my budget is?" asks five things; its
embedding resembles none of the five answers much (in Thai, cosine 0.23-0.34 with each fact
where one question alone scores 0.47-0.76 with its answer), its keyword terms are those of
all five at once, and one of them asking "which day" made the whole message a when
question. Searching each question on its own (its rankings fused apart from the whole
message's, each entry scoring its best over the message and its questions) finds each
answer as a single question would (the "decomposition" of multi-part
questions in retrieval for question answering; Min et al., ACL 2019, split multi-hop
questions into single-hop ones).

A part is a clause with a question word (what, which, how much...: a question that asks
for something, not a yes/no particle such as ไหม, which mostly makes a request polite:
"ช่วยเตือนหน่อยได้ไหมคะ", "can you remind me?"), of a sentence that ends with a question mark (Thai
marks questions with words, not marks: any Thai sentence): clauses are cut at commas,
semicolons and a joining "and"/"or", and in Thai, written without spaces between words, at
the spaces between phrases. A message with fewer than two such parts asks one thing and is
searched whole, as before; at most ``MAX_PARTS`` are searched (each costs an embedding).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime

from llm_bot.memory.first_person import asker_of
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.time_expressions import asks_when, periods
from llm_bot.memory.vectors import Vector

MAX_PARTS = 6
"""Questions searched on their own, at most: each costs one more embedding on the reply
path (~1-4 ms, embedded in the same call as the message)."""
MIN_PART_CHARS = 6
PART_NEAREST = 3
"""A question's dense ranking holds at least its nearest few entries, whatever their
cosine: one question is answered by one or a few messages, and a short question scores
lower with its answer than the dense minimum assumes (a Thai question of five words and the
sentence that answers it: cosine 0.28-0.33 with USE Multilingual, the best of a hundred
messages; the minimum, 0.45, was set for whole messages and MiniLM). Placed there, such an
entry moves the fusion but is recalled only when a score found it (a word of the question
matches it, or its cosine reaches the minimum: ``ranking.found_by``, issue 41)."""

_SENTENCES = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+")
_CLAUSES = re.compile(r"\s*[,;:]\s*(?:(?:and|or|but|also)\s+)?|\s+(?:and|or)\s+(?=\w+\b)", re.I)
_THAI = re.compile(r"[\u0e00-\u0e7f]")
_QUESTION_WORD = re.compile(
    r"(?<![\w'])(?:what|what's|which|who|who's|whom|whose|where|where's|when|why|how|how's)"
    r"(?![\w'])"
    r"|อะไร|ไหน|เท่าไ|กี่|ใคร|เมื่อไ|ยังไง|อย่างไร|ทำไม",
    re.IGNORECASE,
)


def question_parts(text: str) -> list[str]:
    """The questions ``text`` asks, each on its own, when it asks two or more (at most
    ``MAX_PARTS``); else none."""
    parts: list[str] = []
    for sentence in _SENTENCES.split(text):
        thai = _THAI.search(sentence) is not None
        if not thai and not sentence.rstrip().endswith(("?", "\uff1f")):
            continue  # an English statement that mentions "what" asks nothing
        for clause in _clauses(sentence, thai=thai):
            if len(clause) >= MIN_PART_CHARS and _QUESTION_WORD.search(clause):
                parts.append(clause)
    return parts[:MAX_PARTS] if len(parts) >= 2 else []


def _clauses(sentence: str, *, thai: bool) -> list[str]:
    pieces = [p.strip() for p in _CLAUSES.split(sentence) if p and p.strip()]
    if thai:  # phrases, without the conjunction that joins one to the last ("และงบ...")
        pieces = [_THAI_JOINING.sub("", word) for piece in pieces for word in piece.split()]
    return pieces


_THAI_JOINING = re.compile(r"^(?:แล้วก็|และ|หรือ|แต่)(?=[\u0e00-\u0e7f])")
"""A Thai conjunction that starts a phrase (and, or, but, and then), left out of the part
as "and"/"or" are in English: its words are in nearly every message."""


def message_query(
    text: str,
    vectors: Sequence[Vector] | None,
    parts: Sequence[str],
    *,
    created_at: datetime,
    limit: int,
    min_score: float,
    exclude: Collection[str] = frozenset(),
    max_tokens: int | None = None,
    token_count: Callable[[str], int] | None = None,
    across: Vector | None = None,
) -> SearchQuery:
    """The search for a message sent at ``created_at``: its keyword terms, time
    expressions and embedding (``vectors[0]``; None: keywords only), and, when it asks
    several questions (``parts``, embedded as ``vectors[1:]``), each of them on its own;
    the time expressions are then the questions' own ("which day" in one of them makes no
    other a when question). ``across``: the message embedded for the texts of another
    script (the embedder's ``across`` purpose), searched as one more part, by that vector
    alone (its words are the message's), its nearest few kept whatever their cosine.
    A message in the first person names its writer: the user's entries are ranked among
    themselves too (``SearchQuery.asker``, ``first_person.py``)."""

    def one(said: str, vector: Vector | None) -> SearchQuery:
        return SearchQuery(
            vector=vector,
            terms=keyword_terms(said),
            limit=limit,
            min_score=min_score,
            periods=tuple(periods(said, created_at)),
            asks_when=asks_when(said),
        )

    embedded: Sequence[Vector | None] = vectors or [None] * (1 + len(parts))
    query = replace(
        one(text, embedded[0]),
        exclude=frozenset(exclude),
        asker=asker_of(text),
        max_tokens=max_tokens,
        token_count=token_count,
    )
    reach: tuple[SearchQuery, ...] = ()
    if across is not None:
        reach = (SearchQuery(across, (), limit=limit, min_score=min_score, nearest=PART_NEAREST),)
    if not parts:
        return replace(query, parts=reach)
    questions = tuple(
        replace(one(p, v), nearest=PART_NEAREST) for p, v in zip(parts, embedded[1:], strict=True)
    )
    return replace(query, periods=(), asks_when=False, parts=(*questions, *reach))


__all__ = ["MAX_PARTS", "message_query", "question_parts"]
