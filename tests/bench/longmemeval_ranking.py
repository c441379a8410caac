"""Ranking on LongMemEval without the service: a quick loop for retrieval methods (SPEC 8).

Run by hand, no broker or Redis needed (the dataset at a path you give; MIT license, never
committed here)::

    .venv/bin/python -m tests.bench.longmemeval_ranking --data ../shared/data/longmemeval/dev.json

For each question, its haystack becomes index entries as the worker makes them
(``conversation_entries``: one conversation per session, roles as given, the session's
date as ``created_at``), embedded as the worker embeds them (``embed_entries``), in one
in-memory ``IndexSnapshot``; the question is searched as the retriever does at
``question_date`` (``hybrid_search.search``, the periods it names, whether it asks when)
and the hits are packed best first, one prompt line each, into the budget minus ``fixed(budget)``
tokens, as ``locomo_ranking.py`` does. Printed: evidence recall by budget and question
type, and the same without the time rankings. Embeddings are cached on disk by text
(``--cache``), so a second run costs only the searches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from llm_bot.adapters.script_embedder import local_embedder
from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.query_parts import message_query, question_parts
from llm_bot.memory.recall_items import IndexEntry, SearchHit, conversation_entries, text_digest
from llm_bot.memory.vectors import Vector
from llm_bot.ports import Embedder, EmbeddingPurpose, Matrix
from llm_bot.service.indexer import embed_entries
from tests.bench.locomo_ranking import MIN_SCORE, section_tokens, shown
from tests.bench.locomo_scoring import normalised
from tests.bench.longmemeval_scoring import TYPES, Question, Session, questions, recall_of
from tests.bench.plots import plot_recall
from tests.bench.simulated_queries import embedded_questions, untimed

DEFAULT_CACHE = Path("/tmp/llm-bot-bench-cache/longmemeval-embeddings.pickle")  # noqa: S108


class CachedEmbedder:
    """An embedder that remembers every text's vector (on disk between runs)."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self._inner = inner
        self._path = path
        self._vectors: dict[str, Matrix] = {}
        if path.is_file():
            self._vectors = pickle.loads(path.read_bytes())  # noqa: S301  # our own cache file

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        keys = [f"{self.name}:{purpose}:{text_digest(text)}" for text in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            wanted = {k: t for k, t in zip(keys, texts, strict=True) if k in set(missing)}
            vectors = await self._inner.embed(list(wanted.values()), purpose=purpose)
            self._vectors.update(zip(wanted, vectors, strict=True))
        return np.vstack([self._vectors[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_bytes(pickle.dumps(self._vectors))

    async def aclose(self) -> None:
        self.save()


def session_messages(session: Session) -> list[ChatMessage]:
    """A haystack session as a conversation's messages, a second apart."""
    return [
        ChatMessage(
            id=f"{session.id}-{n}",
            role="user" if turn.role == "user" else "assistant",
            content=turn.content,
            created_at=(session.created_at + timedelta(seconds=n)).isoformat(),
            turn=n // 2 + 1,
            seq=n % 2,
        )
        for n, turn in enumerate(session.turns)
    ]


def haystack_entries(question: Question) -> list[IndexEntry]:
    entries: list[IndexEntry] = []
    for session in question.sessions:
        messages = session_messages(session)
        entries += conversation_entries(session.id, messages, indexed_at=0.0)
    return entries


class Tally:
    """Evidence recall by budget and question type."""

    def __init__(self, budgets: Sequence[int]) -> None:
        self.packed: dict[int, dict[str, list[float]]] = {b: defaultdict(list) for b in budgets}
        self.tokens: dict[int, list[int]] = {b: [] for b in budgets}
        """By budget: the tokens of each prompt's recalled section."""

    def add(self, question: Question, hits: Sequence[SearchHit]) -> None:
        for budget, by_type in self.packed.items():
            lines = shown(hits, budget)
            text = "\n".join(hit.entry.text for hit in lines)
            by_type[question.type].append(recall_of(question, normalised(text)))
            self.tokens[budget].append(section_tokens(lines))

    def report(self, label: str) -> None:
        print(f"\n{label}")
        print("| budget | overall | " + " | ".join(TYPES) + " | recalled tokens (mean) |")
        print("|---" * (3 + len(TYPES)) + "|")
        for budget, by_type in self.packed.items():
            values = [v for vs in by_type.values() for v in vs]
            cells = " | ".join(
                f"{statistics.fmean(by_type[t]):.3f}" if by_type.get(t) else "-" for t in TYPES
            )
            tokens = statistics.fmean(self.tokens[budget]) if self.tokens[budget] else 0.0
            print(f"| {budget} | **{statistics.fmean(values):.3f}** | {cells} | {tokens:.0f} |")


def ranked_hits(
    snapshot: IndexSnapshot,
    question: Question,
    vectors: Sequence[Vector],
    *,
    timed: bool = True,
) -> list[SearchHit]:
    query = message_query(
        question.text,
        vectors,
        question_parts(question.text),
        created_at=question.asked_at,
        limit=100,
        min_score=MIN_SCORE,
    )
    if not timed:
        query = untimed(query)
    return search(snapshot, query)


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    embedder = CachedEmbedder(local_embedder(args.embedding_model), args.cache)
    timed, untimed_tally = Tally(args.budgets), Tally(args.budgets)
    selected = [q for q in questions(data) if not args.only or q.id in args.only]
    for number, question in enumerate(selected[: args.questions or None], start=1):
        embedded = await embed_entries(embedder, haystack_entries(question))
        (vectors,) = await embedded_questions(embedder, [question.text])
        snapshot = IndexSnapshot()
        snapshot.upsert(embedded)
        timed.add(question, ranked_hits(snapshot, question, vectors, timed=True))
        untimed_tally.add(question, ranked_hits(snapshot, question, vectors, timed=False))
        embedder.save()
        print(f"{number}. {question.id} ({question.type}): {len(embedded)} entries", flush=True)
    timed.report("the service's ranking")
    untimed_tally.report("baseline: without the time rankings (periods, when-questions)")
    if args.plot is not None:
        plot_recall(
            args.plot,
            "LongMemEval (simulated): evidence recall against the input budget",
            {
                "llm-bot (the service's ranking)": timed.packed,
                "without the time rankings": untimed_tally.packed,
            },
            {kind: kind for kind in TYPES},
            "question type",
        )
    await embedder.aclose()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LongMemEval JSON (e.g. dev.json)")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="write a PNG of the recall")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--questions", type=int, default=0, help="first N questions only")
    parser.add_argument("--only", nargs="*", help="question ids to run")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="embedding cache")
    parser.add_argument(
        "--embedding-model",
        help="LLM_BOT_EMBEDDING_MODEL (default: the service's; the data is English, so "
        "all-MiniLM-L6-v2 ranks the same, with a smaller cache)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    asyncio.run(main(arguments, json.loads(Path(arguments.data).read_text())))
