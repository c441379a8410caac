"""Ranking on LoCoMo without the service: a quick loop for retrieval methods (SPEC 8).

Run by hand, no broker or Redis needed (the dataset at a path you give; CC BY-NC, never
committed here)::

    .venv/bin/python -m tests.bench.locomo_ranking --data ../shared/data/locomo/dev.json

For each conversation, every message becomes index entries as the worker makes them
(``conversation_entries``: one conversation per session, speaker names kept, photo
captions appended) embedded as the worker embeds them (``embed_entries``: each entry's own
embedding and its sentences'), in one in-memory ``IndexSnapshot``; every category 1-4
question is searched (``hybrid_search.search``, up to 100 hits, the service's default
minimum) and the hits are packed best first, one prompt line each, into the budget minus
``fixed(budget)`` tokens (the framing and the fake summarizer's episodes the service adds), a line
that does not fit skipped and the next tried, as context assembly puts back what fits
after its drops. Printed:
evidence recall by budget and category, and the dense ranking's recall of evidence among
its first 10 / 25 / 50. Baseline in the same run: the same entries with their own embedding
only (no sentence embeddings). It predicts ``tests/bench/locomo.py`` within ~0.01.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from llm_bot.adapters.script_embedder import local_embedder
from llm_bot.memory.context import EPISODES_SHARE
from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.query_parts import message_query, question_parts
from llm_bot.memory.recall_budget import RecalledCost, packed
from llm_bot.memory.recall_items import IndexEntry, SearchHit, conversation_entries
from llm_bot.memory.tokens import TiktokenCounter
from llm_bot.memory.vectors import Vector
from llm_bot.ports import Embedder
from llm_bot.service.indexer import embed_entries
from tests.bench.locomo_scoring import CATEGORIES, Conversation, conversations
from tests.bench.plots import plot_recall
from tests.bench.simulated_queries import embedded_questions, untimed

FRAMING = 70
"""Tokens of every prompt that are neither recalled lines nor episodes (the memory
message's framing, the question)."""
EPISODES = 230
"""Tokens of the fake summarizer's five latest episodes (a LoCoMo prompt, 2026-11-26)."""


def fixed(budget: int) -> int:
    """Tokens of a prompt at ``budget`` that are not recalled lines: the framing, and the
    latest episodes within their share of the budget (``memory.context.EPISODES_SHARE``);
    ``tests.bench.locomo`` measured 165 / 259 / 303 with retrieval off at 1,000 / 2,000 /
    4,000 tokens."""
    return FRAMING + min(EPISODES, int(EPISODES_SHARE * budget))


MIN_SCORE = 0.45
ASKED_AT = datetime.now(UTC)
"""When the questions are asked (as in ``locomo.py``: now; LoCoMo has no question dates)."""
DEPTHS = (10, 25, 50)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
COUNTER = TiktokenCounter()


def session_entries(conversation: Conversation) -> list[IndexEntry]:
    entries: list[IndexEntry] = []
    for session in conversation.sessions:
        messages = [
            ChatMessage(
                id=m.dia_id,
                role="user" if m.speaker == conversation.speaker_a else "assistant",
                content=m.text,
                created_at=m.created_at.isoformat(),
                turn=n + 1,
                seq=0,
                name=m.speaker,
            )
            for n, m in enumerate(session.messages)
        ]
        conversation_id = f"{conversation.name}-s{session.number}"
        entries += conversation_entries(conversation_id, messages, indexed_at=0.0)
    return entries


def section_tokens(hits: Sequence[SearchHit]) -> int:
    """Tokens the recalled section spends on ``hits`` (their lines and dates' groups)."""
    cost, spent = RecalledCost(COUNTER.count), 0
    for hit in hits:
        spent += cost.of(hit)
        cost.add(hit)
    return spent


def shown(hits: Sequence[SearchHit], budget: int) -> list[SearchHit]:
    """The hits whose lines the prompt at ``budget`` shows: packed best first into what
    the fixed parts leave, each that fits (as context assembly puts back what fits)."""
    return packed(hits, budget - fixed(budget), COUNTER.count)


class Tally:
    """Evidence recall by budget and category, and the dense ranking's recall at depth."""

    def __init__(self, budgets: Sequence[int]) -> None:
        self.packed: dict[int, dict[int, list[float]]] = {b: defaultdict(list) for b in budgets}
        self.tokens: dict[int, list[int]] = {b: [] for b in budgets}
        """By budget: the tokens of each prompt's recalled section."""
        self.dense: dict[int, list[float]] = defaultdict(list)

    def report(self, label: str) -> None:
        depths = " / ".join(f"{statistics.fmean(self.dense[d]):.3f}" for d in DEPTHS)
        print(f"\n{label}: dense ranking r@{'/'.join(map(str, DEPTHS))} = {depths}")
        print(
            "| budget | overall | "
            + " | ".join(f"cat {c}" for c in CATEGORIES)
            + " | recalled tokens (mean) |"
        )
        print("|---" * (3 + len(CATEGORIES)) + "|")
        for budget, by_category in self.packed.items():
            values = [v for vs in by_category.values() for v in vs]
            cats = " | ".join(
                f"{statistics.fmean(by_category[c]):.3f}" if by_category.get(c) else "-"
                for c in CATEGORIES
            )
            tokens = statistics.fmean(self.tokens[budget]) if self.tokens[budget] else 0.0
            print(f"| {budget} | **{statistics.fmean(values):.3f}** | {cats} | {tokens:.0f} |")


def score(
    snapshot: IndexSnapshot,
    conversation: Conversation,
    questions: Sequence[Sequence[Vector]],
    tally: Tally,
    *,
    timed: bool = True,
) -> None:
    """``questions``: each question's embedding, then its parts' (``question_parts``)."""
    for question, vectors in zip(conversation.questions, questions, strict=True):
        evidence = set(question.evidence)
        dense = snapshot.dense_scores(vectors[0])
        ranked = [snapshot.entries[r].source_id for r in np.argsort(-dense, kind="stable")]
        for depth in DEPTHS:
            tally.dense[depth].append(len(evidence & set(ranked[:depth])) / len(evidence))
        query = message_query(
            question.text,
            vectors,
            question_parts(question.text),
            created_at=ASKED_AT,
            limit=100,
            min_score=MIN_SCORE,
        )
        if not timed:
            query = untimed(query)
        hits = search(snapshot, query)
        for budget, by_category in tally.packed.items():
            lines = shown(hits, budget)
            ids = {hit.entry.source_id for hit in lines}
            by_category[question.category].append(len(evidence & ids) / len(evidence))
            tally.tokens[budget].append(section_tokens(lines))


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    embedder: Embedder = local_embedder(args.embedding_model)
    if args.cache is not None:  # a second run (another tree's code: an A/B) embeds nothing
        from tests.bench.longmemeval_ranking import CachedEmbedder  # noqa: PLC0415  # it imports this

        embedder = CachedEmbedder(embedder, args.cache)
    with_sentences, own_only = Tally(args.budgets), Tally(args.budgets)
    untimed_tally = Tally(args.budgets)
    for conversation in conversations(data):
        embedded = await embed_entries(embedder, session_entries(conversation))
        questions = await embedded_questions(embedder, [q.text for q in conversation.questions])
        for tally, keep in ((with_sentences, None), (own_only, 1)):
            snapshot = IndexSnapshot()
            snapshot.upsert((entry, vectors[:keep]) for entry, vectors in embedded)
            score(snapshot, conversation, questions, tally)
            if keep is None:
                score(snapshot, conversation, questions, untimed_tally, timed=False)
        print(f"{conversation.name}: {len(embedded)} entries", flush=True)
    with_sentences.report("entries with their sentence embeddings (the service)")
    untimed_tally.report("baseline: without the time rankings (periods, when-questions)")
    own_only.report("baseline: each entry's own embedding only")
    if args.plot is not None:
        plot(args.plot, with_sentences, untimed_tally, own_only)
    await embedder.aclose()


def plot(path: Path, service: Tally, untimed: Tally, own_only: Tally) -> None:
    """``--plot PATH``: recall against the budget, overall and by category."""
    plot_recall(
        path,
        "LoCoMo (simulated): evidence recall against the input budget",
        {
            "llm-bot (the service's ranking)": service.packed,
            "without the time rankings": untimed.packed,
            "each entry's own embedding only": own_only.packed,
        },
        CATEGORY_NAMES,
        "category",
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON (locomo10.json or dev.json)")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="write a PNG of the recall")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument(
        "--cache", type=Path, help="embedding cache file (kept between runs; default: none)"
    )
    parser.add_argument(
        "--embedding-model",
        help="LLM_BOT_EMBEDDING_MODEL (default: the service's; the data is English, so "
        "all-MiniLM-L6-v2 ranks the same)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    asyncio.run(main(arguments, json.loads(Path(arguments.data).read_text())))
