"""What a search asks (``SearchQuery``): the message's embedding and keyword terms, the
periods it names, its questions, and the bounds on its hits."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from llm_bot.memory.time_expressions import Period
from llm_bot.memory.vectors import Vector


@dataclass(frozen=True)
class SearchQuery:
    """A query: its embedding (None when dense search is off), its keyword terms, the
    source ids to leave out, how many hits at most, and the dense minimum."""

    vector: Vector | None
    terms: Sequence[str]
    exclude: Collection[str] = frozenset()
    limit: int = 50
    min_score: float = 0.45
    periods: Sequence[Period] = ()
    """The periods the message names (``time_expressions.periods``)."""
    asks_when: bool = False
    """Whether the message asks when something happened."""
    max_tokens: int | None = None
    """Hits are kept while their lines cost at most this many tokens together
    (``recall_budget.within_tokens``), counted with ``token_count``; None: no bound."""
    token_count: Callable[[str], int] | None = field(default=None, compare=False)
    nearest: int = 0
    """The dense ranking holds at least this many nearest entries, whatever their cosine
    (the minimum still decides what counts as found)."""
    asker: str | None = None
    """The speaker the message names by speaking of its writer (the first person: the
    user's entries, ``first_person.asker_of``); None: it names nobody so."""
    parts: Sequence[SearchQuery] = ()
    """The questions of a message that asks several (``query_parts.py``), each searched
    on its own (its embedding, terms and time expressions), its rankings fused apart from
    the message's (``best_of``); an entry's fused, dense and keyword scores are its best
    over them."""
