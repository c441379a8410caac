"""How much retrieval recalls: enough lines to fill recall's share of the prompt, by tokens
(SPEC 5.7).

A fixed number of items says nothing about a prompt's size: sixteen short chat lines are
~400 tokens, sixteen passages of an assistant's long answers ~3,000, and a Thai line costs
several times the tokens of its English translation. Retrieval therefore keeps its hits,
best first, while their lines (as the memory message shows them) fit in a token budget:
recall's share of the input budget. Context assembly then fits the whole prompt exactly,
dropping the lowest-scored items first (``context.py``); this bound only keeps the search
from handing it far more than could ever fit. ``LLM_BOT_RETRIEVAL_MAX_ITEMS`` stays an
optional cap on the count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llm_bot.memory.recall_items import SearchHit

LINE_OVERHEAD_TOKENS = 2
"""What a line adds to the memory message besides its text: its JSON quotes, comma and
line break."""
UNDATED = "undated"
"""The date group of recalled items without a date (``memory_block.recalled_group``)."""
GROUP_OVERHEAD_TOKENS = 4
"""What a date's group adds besides its date: the key's quotes, the colon, the brackets and
line breaks (``memory_block.by_group``)."""
CANDIDATE_LIMIT = 200
"""Hits asked of the index when no item cap is configured: as deep as each ranking is read
before fusion (``ranking.CANDIDATES_PER_RANKING``), far more than any budget holds."""


def line_tokens(hit: SearchHit, count: Callable[[str], int]) -> int:
    """Tokens the hit's line costs in the memory message (``memory_block.recalled_line``:
    speaker and text; counted before sanitising, which only removes characters)."""
    entry = hit.entry
    line = f"{entry.speaker}: {entry.text}" if entry.speaker else entry.text
    return _counted(count, line) + LINE_OVERHEAD_TOKENS


def group_tokens(hit: SearchHit, count: Callable[[str], int]) -> int:
    """Tokens the group of the hit's date costs (``memory_block.recalled_group``), paid by
    the first of its lines: counted with a stand-in weekday (each is one token)."""
    date = hit.entry.date[:10]
    return _counted(count, f"{date} Mon" if date else UNDATED) + GROUP_OVERHEAD_TOKENS


class RecalledCost:
    """What each further line costs the recalled section: its line, and its date's group
    when it is the first of that date."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._dates: set[str] = set()

    def of(self, hit: SearchHit) -> int:
        """Tokens ``hit`` would add."""
        cost = line_tokens(hit, self._count)
        if hit.entry.date[:10] not in self._dates:
            cost += group_tokens(hit, self._count)
        return cost

    def add(self, hit: SearchHit) -> None:
        """``hit`` is shown: its date's group is paid for."""
        self._dates.add(hit.entry.date[:10])


REMEMBERED_COUNTS = 16384
_counts: dict[tuple[Callable[[str], int], int, int], int] = {}


def _counted(count: Callable[[str], int], line: str) -> int:
    """``count(line)``, remembered: the same entries come back search after search, and a
    count (~20 µs for a chat line) costs more than the rest of a hit. Remembered by the
    line's length and hash, not its text: no user's words stay in memory after an erasure
    (two lines with the same length and hash would share a count: context assembly counts
    the prompt exactly again, so no prompt can go over its budget)."""
    key = (count, len(line), hash(line))
    counted = _counts.get(key)
    if counted is None:
        if len(_counts) >= REMEMBERED_COUNTS:
            _counts.clear()
        counted = _counts[key] = count(line)
    return counted


def within_tokens(
    hits: Sequence[SearchHit], tokens: int, count: Callable[[str], int]
) -> list[SearchHit]:
    """The first of ``hits`` (best first) whose lines together cost at most ``tokens``;
    counting stops at the first hit that does not fit."""
    kept: list[SearchHit] = []
    spent = 0
    cost = RecalledCost(count)
    for hit in hits:
        spent += cost.of(hit)
        if spent > tokens:
            break
        cost.add(hit)
        kept.append(hit)
    return kept


def packed(hits: Sequence[SearchHit], tokens: int, count: Callable[[str], int]) -> list[SearchHit]:
    """Of ``hits`` (best first), each whose line still fits in ``tokens``, the others
    skipped: greedy packing by score, as context assembly fills recall's room (the
    benchmarks' simulations use it)."""
    kept: list[SearchHit] = []
    cost = RecalledCost(count)
    for hit in hits:
        tokens_of = cost.of(hit)
        if tokens_of > tokens:
            continue
        tokens -= tokens_of
        cost.add(hit)
        kept.append(hit)
    return kept


__all__ = [
    "CANDIDATE_LIMIT",
    "GROUP_OVERHEAD_TOKENS",
    "LINE_OVERHEAD_TOKENS",
    "UNDATED",
    "RecalledCost",
    "group_tokens",
    "line_tokens",
    "packed",
    "within_tokens",
]
