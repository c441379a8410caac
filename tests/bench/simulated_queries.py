"""The service's search for a question, as the ranking simulations build it
(``locomo_ranking.py``, ``longmemeval_ranking.py``): the same ``message_query`` as the
reply path, with the question's parts (``memory/query_parts.py``) embedded with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from llm_bot.memory.query_parts import question_parts
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector
from llm_bot.ports import Embedder


async def embedded_questions(embedder: Embedder, texts: Sequence[str]) -> list[list[Vector]]:
    """Each text's embedding, then its parts', all in one call."""
    parts = [question_parts(text) for text in texts]
    flat = [said for text, asked in zip(texts, parts, strict=True) for said in (text, *asked)]
    vectors = await embedder.embed(flat, purpose="query")
    out: list[list[Vector]] = []
    start = 0
    for asked in parts:
        rows = vectors[start : start + 1 + len(asked)]
        out.append([np.asarray(row, dtype=np.float32) for row in rows])
        start += 1 + len(asked)
    return out


def untimed(query: SearchQuery) -> SearchQuery:
    """``query`` without its time rankings (the ablation the simulations print)."""
    return replace(query, periods=(), asks_when=False, parts=tuple(untimed(p) for p in query.parts))
