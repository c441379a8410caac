"""Memory quality on LoCoMo: is the evidence of each question in the prompt? (SPEC 8)

Run by hand (not part of ``make test``), with the dataset at a path you give (CC BY-NC;
never committed here; two conversations for development are in ../shared/data/locomo)::

    .venv/bin/python -m tests.bench.locomo --data ../shared/data/locomo/dev.json

For each conversation, one user: every session is imported through the broker as one
``transcript`` event of its own conversation (speaker_a = user, speaker_b = assistant,
names kept, the session's date as ``created_at``, photo captions appended as
`` [shares a photo: <caption>]``), then ``conversation.end``; the memory worker (in
process) classifies, compacts, finalizes and indexes until it is idle, then stops. Then,
after one warm-up message (the service process is new: its first search of the user loads
the index past the search's time budget, as in a service just started, and recalls
nothing), every category 1-4 question is asked as a ``message`` in a new conversation of
the same user, once per input budget (``--budgets``, default 1000 2000 4000), and the prompt the
fake model received is scored (``locomo_scoring.py``): the share of the question's evidence
messages present, overall and by category. Baselines in the same run: the service with
``LLM_BOT_EMBEDDINGS=off`` (window, summary and long-term bundle only: llm-bot before
retrieval) and a last-N window (the most recent messages that fit the budget). Also:
prompt tokens (mean, max, how many over budget; counted with the offline cl100k
encoding), and the duration of the ``recall.search`` span (retrieval on the reply path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_bot.fake_model import FakeModelServer
from llm_bot.logs import configure_logging
from llm_bot.memory.tokens import TiktokenCounter
from tests.bench.in_flight import ByQuestion, ask_all, outcomes
from tests.bench.locomo_scoring import (
    CATEGORIES,
    Conversation,
    conversations,
    last_n_prompt,
    prompt_text,
    recall_of,
)
from tests.bench.throughput import remove_keys
from tests.bench.token_cost import settle
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, bot, running_worker, settings_for_test
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

TENANT = "locomo"
COUNTER = TiktokenCounter()
OUTPUT_TOKENS = 256
MARGIN = 64


Prompts = ByQuestion
"""The fake model's responder: memory-worker answers, each reply prompt kept."""


@dataclass
class Scores:
    """Evidence recall of one strategy at one budget."""

    by_category: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    tokens: list[int] = field(default_factory=list)
    over_budget: int = 0
    search_ms: list[float] = field(default_factory=list)
    recall_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, category: int, recall: float, tokens: int, budget: int) -> None:
        self.by_category[category].append(recall)
        self.tokens.append(tokens)
        self.over_budget += tokens > budget

    @property
    def overall(self) -> float:
        values = [v for vs in self.by_category.values() for v in vs]
        return statistics.fmean(values) if values else 0.0


def transcript_event(conversation: Conversation, session_index: int, user: str) -> dict[str, Any]:
    session = conversation.sessions[session_index]
    return message_event(
        tenant=TENANT,
        user=user,
        conversation=f"{conversation.name}-s{session.number}",
        text=None,
        event_type="transcript",
        created_at=session.created_at.isoformat(),
        transcript=[
            {
                "role": "user" if m.speaker == conversation.speaker_a else "assistant",
                "text": m.text,
                "name": m.speaker,
                "created_at": (m.created_at + timedelta(seconds=n)).isoformat(),
            }
            for n, m in enumerate(session.messages)
        ],
    )


def end_event(conversation: Conversation, session_index: int, user: str) -> dict[str, Any]:
    session = conversation.sessions[session_index]
    return message_event(
        tenant=TENANT,
        user=user,
        conversation=f"{conversation.name}-s{session.number}",
        text=None,
        event_type="conversation.end",
    )


def settings_for(
    urls: ServiceUrls,
    base_url: str,
    suffix: dict[str, Any],
    budget: int,
    embeddings: str,
    *,
    max_items: int | None = None,
) -> Any:
    """The service's settings at ``budget``; ``max_items`` caps recalled items
    (``LLM_BOT_RETRIEVAL_MAX_ITEMS``; None: the service's default)."""
    if max_items is not None:
        suffix = {**suffix, "retrieval_max_items": max_items}
    return settings_for_test(
        urls,
        base_url,
        max_context_tokens=budget + OUTPUT_TOKENS + MARGIN,
        max_output_tokens=OUTPUT_TOKENS,
        context_safety_margin=MARGIN,
        embeddings=embeddings,
        retry_base_seconds=0.05,
        log_level="warning",
        **suffix,
    )


async def import_history(
    urls: ServiceUrls, model: FakeModelServer, conversation: Conversation, user: str, args: Any
) -> float:
    """Import every session and let the worker finish; returns the seconds it took."""
    settings = settings_for(urls, model.base_url, {}, 2000, args.embeddings)
    started = time.perf_counter()
    async with bot(settings) as (_service, client), running_worker(settings) as worker:
        for index in range(len(conversation.sessions)):
            await client.publish(transcript_event(conversation, index, user))
            await client.publish(end_event(conversation, index, user))
        await asyncio.sleep(1.0)
        while not await settle(client, worker, args.settle_timeout):
            print("  worker still busy...", flush=True)
        await client.wait_for_consumers()
    return time.perf_counter() - started


WARM_UP = "Can you remind me what we talked about before?"
WARM_UP_SECONDS = 3.0
"""Time for the user's index to finish loading after the warm-up message."""


async def warm_up(client: Integrator, tenant: str, user: str) -> None:
    """One message of ``user`` before the questions. A new process has none of the user's
    index in memory: its first search loads it (hundreds of ms) past the search's time
    budget and recalls nothing. A user with a history sends messages before the one that
    counts, so the questions are searched as in a running service."""
    await client.publish(
        message_event(tenant=tenant, user=user, conversation=new_id("w"), text=WARM_UP)
    )
    await client.next_candidate(within=60)
    await asyncio.sleep(WARM_UP_SECONDS)


async def ask(
    *,
    urls: ServiceUrls,
    prompts: Prompts,
    model: FakeModelServer,
    conversation: Conversation,
    user: str,
    budget: int,
    embeddings: str,
    max_items: int | None = None,
    in_flight: int = 1,
    cold: bool = False,
) -> Scores:
    """Every question in a new conversation of the user; the prompts scored. ``in_flight``
    questions are outstanding at once; ``cold``: no warm-up message first (the service's
    first search of the user loads the index, as after a deploy)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = settings_for(urls, model.base_url, {}, budget, embeddings, max_items=max_items)
    messages = conversation.messages()
    scores = Scores()
    async with bot(settings, tracer_provider=provider) as (_service, client):
        if not cold:
            await warm_up(client, TENANT, user)
        exporter.clear()
        events = [
            message_event(tenant=TENANT, user=user, conversation=new_id("q"), text=q.text)
            for q in conversation.questions
        ]
        if in_flight > 1:
            prompts.prompts.clear()
            await ask_all(client, events, in_flight)
        for question, event in zip(conversation.questions, events, strict=True):
            if in_flight <= 1:
                prompts.last = []
                await client.publish(event)
                await client.next_candidate(within=60)
            asked = prompts.prompts.get(question.text, [])
            model.requests.clear()
            tokens = COUNTER.count_messages(asked)
            recall = recall_of(question, messages, prompt_text(asked))
            scores.add(question.category, recall, tokens, budget)
    scores.outcomes += outcomes(exporter.get_finished_spans())
    for span in exporter.get_finished_spans():
        milliseconds = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        if span.name == "recall.search":
            scores.search_ms.append(milliseconds)
        elif span.name == "recall":
            scores.recall_ms.append(milliseconds)
    return scores


def last_n(conversation: Conversation, budget: int) -> Scores:
    messages = conversation.messages()
    scores = Scores()
    for question in conversation.questions:
        prompt = last_n_prompt(conversation, question.text, budget, COUNTER.count_messages)
        tokens = COUNTER.count_messages(prompt)
        scores.add(
            question.category, recall_of(question, messages, prompt_text(prompt)), tokens, budget
        )
    return scores


def merge(parts: Iterable[Scores]) -> Scores:
    total = Scores()
    for part in parts:
        for category, values in part.by_category.items():
            total.by_category[category].extend(values)
        total.tokens += part.tokens
        total.over_budget += part.over_budget
        total.search_ms += part.search_ms
        total.recall_ms += part.recall_ms
        total.outcomes += part.outcomes
    return total


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def report(results: dict[tuple[str, int], Scores], budgets: list[int]) -> None:
    header = "| strategy | budget | overall | " + " | ".join(f"cat {c}" for c in CATEGORIES)
    print(
        header
        + " | prompt tokens mean / max | over budget | recall.search p50 / p95 ms | recall node p50 / p95 ms | timed out / searches |"
    )
    print("|" + "---|" * (8 + len(CATEGORIES)))
    for strategy in ("llm-bot (retrieval)", "llm-bot (embeddings off)", "last-N window"):
        for budget in budgets:
            s = results.get((strategy, budget))
            if s is None:
                continue
            cats = " | ".join(
                f"{statistics.fmean(s.by_category[c]):.3f} ({len(s.by_category[c])})"
                if s.by_category.get(c)
                else "-"
                for c in CATEGORIES
            )
            tokens = f"{statistics.fmean(s.tokens):.0f} / {max(s.tokens)}" if s.tokens else "-"
            search = (
                f"{percentile(s.search_ms, 0.5):.1f} / {percentile(s.search_ms, 0.95):.1f}"
                if s.search_ms
                else "-"
            )
            node = (
                f"{percentile(s.recall_ms, 0.5):.1f} / {percentile(s.recall_ms, 0.95):.1f}"
                if s.recall_ms
                else "-"
            )
            print(
                f"| {strategy} | {budget} | **{s.overall:.3f}** | {cats} | {tokens} | "
                f"{s.over_budget} | {search} | {node} | "
                f"{s.outcomes['timeout']} / {sum(s.outcomes.values())} |"
            )


async def then_clean(run: Awaitable[None]) -> None:
    """``run``, then this run's Redis keys removed (whatever happened)."""
    try:
        await run
    finally:
        removed = await remove_keys(os.environ.get("REDIS_URL", DEFAULT_REDIS_URL))
        print(f"removed {removed} Redis keys of this run", flush=True)


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    await then_clean(measure(args, data))


async def measure(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    configure_logging(level=args.log_level, fmt="console")
    selected = [
        c if not args.questions else replace(c, questions=c.questions[: args.questions])
        for c in conversations(data)
        if not args.only or c.name in args.only
    ]
    urls = ServiceUrls(
        amqp_url=os.environ.get("AMQP_URL", DEFAULT_AMQP_URL),
        redis_url=os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
    )
    results: dict[tuple[str, int], list[Scores]] = defaultdict(list)
    prompts = Prompts()
    async with FakeModelServer(responder=prompts) as model:
        for conversation in selected:
            user = new_id("u")
            seconds = await import_history(urls, model, conversation, user, args)
            print(
                f"{conversation.name}: {sum(len(s.messages) for s in conversation.sessions)} "
                f"messages in {len(conversation.sessions)} sessions imported and settled in "
                f"{seconds:.0f} s; {len(conversation.questions)} questions",
                flush=True,
            )
            model.requests.clear()
            for budget in args.budgets:
                for strategy, embeddings in (
                    ("llm-bot (retrieval)", args.embeddings),
                    ("llm-bot (embeddings off)", "off"),
                ):
                    scores = await ask(
                        urls=urls,
                        prompts=prompts,
                        model=model,
                        conversation=conversation,
                        user=user,
                        budget=budget,
                        embeddings=embeddings,
                        max_items=args.max_items,
                        in_flight=args.in_flight,
                        cold=args.cold,
                    )
                    results[(strategy, budget)].append(scores)
                    print(f"  {strategy} @ {budget}: {scores.overall:.3f}", flush=True)
                results[("last-N window", budget)].append(last_n(conversation, budget))
    report({key: merge(parts) for key, parts in results.items()}, args.budgets)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON (locomo10.json or dev.json)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--embeddings", default="local", choices=["local", "openai"])
    parser.add_argument("--only", nargs="*", help="conversation sample ids to run")
    parser.add_argument("--questions", type=int, default=0, help="first N questions only")
    parser.add_argument(
        "--max-items",
        type=int,
        default=None,
        help="LLM_BOT_RETRIEVAL_MAX_ITEMS (default: unset, the service's default)",
    )
    parser.add_argument("--settle-timeout", type=float, default=300.0)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=1,
        help="questions outstanding at once (32: LLM_BOT_PREFETCH's default, as real traffic)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm-up message: the first questions meet the user's index not yet loaded",
    )
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    asyncio.run(main(arguments, json.loads(Path(arguments.data).read_text())))
