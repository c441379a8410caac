"""Memory quality on LongMemEval: is the evidence of each question in the prompt? (SPEC 8)

Run by hand (not part of ``make test``), with the dataset at a path you give (MIT license;
never committed here; 24 questions for development are in ../shared/data/longmemeval)::

    .venv/bin/python -m tests.bench.longmemeval --data ../shared/data/longmemeval/dev.json

For each question, one user: every session of its haystack is imported through the broker
as one ``transcript`` event of its own conversation (roles as given, the session's date as
``created_at``, a second apart turn by turn), then ``conversation.end``; the memory worker
(in process) classifies, compacts, finalizes and indexes until it is idle, then stops.
Memory formation is timed on its own: the service imports every session first, then the
worker starts and drains the jobs; printed per question and in total: messages per second
of the worker, and its CPU per message split by thread (the event loop's, the other
threads': embedding; the fake model's, which runs on a thread of its own). ``--formation-only`` stops
there (``--questions N`` for a sample). Then the question
is asked as a ``message`` in a new conversation of the same user with ``created_at`` =
``question_date`` (after one warm-up message, so the user's index is loaded as in a
running service), once per input budget (``--budgets``, default 1000 2000 4000), and the
prompt the fake model received is scored (``longmemeval_scoring.py``): the share of the
question's evidence turns present, overall and by question type. Baseline in the same run:
a last-N window (the most recent turns that fit the budget). Also: prompt tokens (mean,
max, how many over budget) and the ``recall.search`` span's duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_bot.fake_model import FakeModelServer
from llm_bot.logs import configure_logging
from tests.bench.in_flight import ask_all, outcomes
from tests.bench.locomo import COUNTER, Prompts, percentile, settings_for, then_clean, warm_up
from tests.bench.locomo_scoring import prompt_text
from tests.bench.longmemeval_scoring import TYPES, Question, last_n_prompt, questions, recall_of
from tests.bench.token_cost import worker_idle
from tests.support.events import message_event, new_id
from tests.support.harness import bot, integrator, running_service, running_worker
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

TENANT = "longmemeval"


@dataclass
class Scores:
    """Evidence recall of one strategy at one budget, by question type."""

    by_type: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    tokens: list[int] = field(default_factory=list)
    over_budget: int = 0
    search_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, recall: float, tokens: int, budget: int) -> None:
        self.by_type[kind].append(recall)
        self.tokens.append(tokens)
        self.over_budget += tokens > budget

    @property
    def overall(self) -> float:
        values = [v for vs in self.by_type.values() for v in vs]
        return statistics.fmean(values) if values else 0.0


def transcript_events(question: Question, user: str) -> list[dict[str, Any]]:
    """Each session as a ``transcript`` event and its ``conversation.end``."""
    events: list[dict[str, Any]] = []
    for session in question.sessions:
        conversation = f"{question.id}-{session.id}"
        events.append(
            message_event(
                tenant=TENANT,
                user=user,
                conversation=conversation,
                text=None,
                event_type="transcript",
                created_at=session.created_at.isoformat(),
                transcript=[
                    {
                        "role": turn.role,
                        "text": turn.content,
                        "created_at": (session.created_at + timedelta(seconds=n)).isoformat(),
                    }
                    for n, turn in enumerate(session.turns)
                    if turn.content.strip()
                ],
            )
        )
        events.append(
            message_event(
                tenant=TENANT,
                user=user,
                conversation=conversation,
                text=None,
                event_type="conversation.end",
            )
        )
    return events


@dataclass(frozen=True)
class Imported:
    """One haystack's memory formation: the worker's part, from its start to idle."""

    messages: int
    seconds: float
    embedding_cpu: float
    """CPU seconds of the worker's other threads (the embedder's, the default executor's)."""
    worker_cpu: float
    """CPU seconds of the event loop's thread (the worker but its embeddings)."""
    model_cpu: float
    """CPU seconds of the fake model's thread (a remote model's in production)."""

    @property
    def cpu(self) -> float:
        return self.embedding_cpu + self.worker_cpu


def thread_cpu(prefix: str) -> float:
    """CPU seconds so far of this process's threads whose name starts with ``prefix``."""
    return sum(
        time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        for t in threading.enumerate()
        if t.name.startswith(prefix) and t.ident is not None and t.is_alive()
    )


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds so far: the process's other threads (the embedder's, the default
    executor's), the calling thread (the event loop's), the fake model's thread.

    The other threads' share is the process's CPU less the loop's and the model's: threads
    that end during a measurement (an embedder's executor of the service stopped before)
    no longer report their own clocks, so summing the live ones could count backwards."""

    embedding: float
    loop: float
    model: float

    @classmethod
    def now(cls) -> CpuClock:
        loop, model = time.thread_time(), thread_cpu(MODEL_THREAD)
        return cls(time.process_time() - loop - model, loop, model)

    def since(self, start: CpuClock) -> CpuClock:
        return CpuClock(
            self.embedding - start.embedding, self.loop - start.loop, self.model - start.model
        )


MODEL_THREAD = "fake-model"


@asynccontextmanager
async def model_thread(responder: Prompts) -> AsyncIterator[FakeModelServer]:
    """The fake model served from its own thread and event loop, so that its CPU is not
    counted as the worker's."""
    ready: asyncio.Future[FakeModelServer] = asyncio.get_running_loop().create_future()
    caller = asyncio.get_running_loop()
    stop: asyncio.Event | None = None
    model_loop: asyncio.AbstractEventLoop | None = None

    async def serve() -> None:
        nonlocal stop, model_loop
        stop, model_loop = asyncio.Event(), asyncio.get_running_loop()
        async with FakeModelServer(responder=responder) as model:
            caller.call_soon_threadsafe(ready.set_result, model)
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name=MODEL_THREAD)
    thread.start()
    try:
        yield await ready
    finally:
        if model_loop is not None and stop is not None:
            model_loop.call_soon_threadsafe(stop.set)
        await asyncio.to_thread(thread.join)


async def import_haystack(
    urls: ServiceUrls, model: FakeModelServer, question: Question, user: str, args: Any
) -> Imported:
    """Every session imported by the service, then the worker started and run until idle;
    the worker's part timed (wall clock and CPU, from its start to the first of the idle
    polls that end the wait)."""
    settings = settings_for(urls, model.base_url, model_setting(args), 2000, args.embeddings)
    async with integrator(settings) as client:  # keeps the queues until the end
        async with running_service(settings) as service:
            for event in transcript_events(question, user):
                await client.publish(event)
            async with asyncio.timeout(args.settle_timeout):
                while await client.ingress_depth() or service.consumer.in_flight:
                    await asyncio.sleep(0.1)
        async with running_worker(settings) as worker:
            started, cpu = time.perf_counter(), CpuClock.now()
            idle_at: tuple[float, CpuClock] | None = None
            quiet = 0
            async with asyncio.timeout(args.settle_timeout):
                while quiet < SETTLED_POLLS:
                    if await worker_idle(client, worker):
                        quiet += 1
                        idle_at = idle_at or (time.perf_counter(), CpuClock.now())
                    else:
                        quiet, idle_at = 0, None
                    await asyncio.sleep(0.1)
    assert idle_at is not None  # the loop ends idle
    used = idle_at[1].since(cpu)
    messages = sum(1 for s in question.sessions for t in s.turns if t.content.strip())
    return Imported(messages, idle_at[0] - started, used.embedding, used.loop, used.model)


def model_setting(args: Any) -> dict[str, Any]:
    """``--embedding-model`` as the service's setting (none: the service's default)."""
    return {"embedding_model": args.embedding_model} if args.embedding_model else {}


SETTLED_POLLS = 5
"""Polls 0.1 s apart that find the worker idle (jobs queue empty, nothing in flight)."""


def formation_line(label: str, imports: list[Imported]) -> str:
    messages = sum(i.messages for i in imports)
    seconds = sum(i.seconds for i in imports)

    def per_message(cpu: float) -> str:
        return f"{1000 * cpu / messages:.1f}"

    return (
        f"{label}: {messages} messages in {seconds:.1f} s: {messages / seconds:.1f} "
        f"messages/s; worker CPU {per_message(sum(i.cpu for i in imports))} ms per message "
        f"(event loop {per_message(sum(i.worker_cpu for i in imports))}, other threads "
        f"(embedding) {per_message(sum(i.embedding_cpu for i in imports))}; fake model "
        f"{per_message(sum(i.model_cpu for i in imports))} besides)"
    )


def traced_service(
    urls: ServiceUrls, model: FakeModelServer, budget: int, args: Any
) -> tuple[InMemorySpanExporter, TracerProvider, Any]:
    """The service's settings at ``budget``, and a tracer provider whose spans (the
    ``recall.search`` durations and outcomes) the exporter keeps."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = settings_for(
        urls, model.base_url, model_setting(args), budget, args.embeddings, max_items=args.max_items
    )
    return exporter, provider, settings


async def ask(  # noqa: PLR0917  # one question, the run's parts
    urls: ServiceUrls,
    prompts: Prompts,
    model: FakeModelServer,
    question: Question,
    user: str,
    budget: int,
    args: Any,
) -> Scores:
    """The question in a new conversation of the user, at its date; the prompt scored."""
    exporter, provider, settings = traced_service(urls, model, budget, args)
    scores = Scores()
    async with bot(settings, tracer_provider=provider) as (_service, client):
        if not args.cold:
            await warm_up(client, TENANT, user)
        exporter.clear()
        event = message_event(
            tenant=TENANT,
            user=user,
            conversation=new_id("q"),
            text=question.text,
            created_at=question.asked_at.isoformat(),
        )
        prompts.last = []
        await client.publish(event)
        await client.next_candidate(within=60)
        model.requests.clear()
        tokens = COUNTER.count_messages(prompts.last)
        scores.add(question.type, recall_of(question, prompt_text(prompts.last)), tokens, budget)
    scores.search_ms += [
        ((s.end_time or 0) - (s.start_time or 0)) / 1e6
        for s in exporter.get_finished_spans()
        if s.name == "recall.search"
    ]
    return scores


async def ask_together(
    urls: ServiceUrls,
    prompts: Prompts,
    model: FakeModelServer,
    *,
    asked: list[tuple[Question, str]],
    budget: int,
    args: Any,
) -> Scores:
    """Every question (with its user) asked as real traffic asks: ``--in-flight`` at once,
    on one freshly started service; with ``--cold`` no user sent a message before (each
    user's first question meets its index not yet loaded, as after a deploy)."""
    exporter, provider, settings = traced_service(urls, model, budget, args)
    scores = Scores()
    async with bot(settings, tracer_provider=provider) as (_service, client):
        if not args.cold:
            for _, user in asked:
                await warm_up(client, TENANT, user)
        exporter.clear()
        prompts.prompts.clear()
        events = [
            message_event(
                tenant=TENANT,
                user=user,
                conversation=new_id("q"),
                text=question.text,
                created_at=question.asked_at.isoformat(),
            )
            for question, user in asked
        ]
        await ask_all(client, events, args.in_flight)
        model.requests.clear()
    for question, _ in asked:
        prompt = prompts.prompts.get(question.text, [])
        tokens = COUNTER.count_messages(prompt)
        scores.add(question.type, recall_of(question, prompt_text(prompt)), tokens, budget)
    spans = exporter.get_finished_spans()
    scores.outcomes += outcomes(spans)
    scores.search_ms += [
        ((s.end_time or 0) - (s.start_time or 0)) / 1e6 for s in spans if s.name == "recall.search"
    ]
    return scores


def last_n(question: Question, budget: int) -> Scores:
    prompt = last_n_prompt(question, budget, COUNTER.count_messages)
    scores = Scores()
    tokens = COUNTER.count_messages(prompt)
    scores.add(question.type, recall_of(question, prompt_text(prompt)), tokens, budget)
    return scores


def merge(parts: list[Scores]) -> Scores:
    total = Scores()
    for part in parts:
        for kind, values in part.by_type.items():
            total.by_type[kind].extend(values)
        total.tokens += part.tokens
        total.over_budget += part.over_budget
        total.search_ms += part.search_ms
        total.outcomes += part.outcomes
    return total


def report(results: dict[tuple[str, int], Scores], budgets: list[int]) -> None:
    print("| strategy | budget | overall | " + " | ".join(TYPES), end="")
    print(
        " | prompt tokens mean / max | over budget | recall.search p50 / p95 ms "
        "| timed out / searches |"
    )
    print("|" + "---|" * (7 + len(TYPES)))
    for strategy in ("llm-bot (retrieval)", "last-N window"):
        for budget in budgets:
            s = results.get((strategy, budget))
            if s is None:
                continue
            cells = " | ".join(
                f"{statistics.fmean(s.by_type[t]):.3f} ({len(s.by_type[t])})"
                if s.by_type.get(t)
                else "-"
                for t in TYPES
            )
            tokens = f"{statistics.fmean(s.tokens):.0f} / {max(s.tokens)}" if s.tokens else "-"
            search = (
                f"{percentile(s.search_ms, 0.5):.1f} / {percentile(s.search_ms, 0.95):.1f}"
                if s.search_ms
                else "-"
            )
            print(
                f"| {strategy} | {budget} | **{s.overall:.3f}** | {cells} | {tokens} | "
                f"{s.over_budget} | {search} | "
                f"{s.outcomes['timeout']} / {sum(s.outcomes.values())} |"
            )


async def main(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    await then_clean(measure(args, data))


async def measure(args: argparse.Namespace, data: list[dict[str, Any]]) -> None:
    configure_logging(level=args.log_level, fmt="console")
    selected = [q for q in questions(data) if not args.only or q.id in args.only]
    selected = selected[: args.questions or None]
    urls = ServiceUrls(
        amqp_url=os.environ.get("AMQP_URL", DEFAULT_AMQP_URL),
        redis_url=os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
    )
    results: dict[tuple[str, int], list[Scores]] = defaultdict(list)
    imports: list[Imported] = []
    asked: list[tuple[Question, str]] = []
    prompts = Prompts()
    async with model_thread(prompts) as model:
        for question in selected:
            user = new_id("u")
            imported = await import_haystack(urls, model, question, user, args)
            imports.append(imported)
            print(
                formation_line(
                    f"{question.id} ({question.type}, {len(question.sessions)} sessions)",
                    [imported],
                ),
                flush=True,
            )
            if args.formation_only:
                continue
            if args.in_flight > 1:
                asked.append((question, user))
                continue
            model.requests.clear()
            for budget in args.budgets:
                scores = await ask(urls, prompts, model, question, user, budget, args)
                results[("llm-bot (retrieval)", budget)].append(scores)
                results[("last-N window", budget)].append(last_n(question, budget))
                print(f"  @ {budget}: {scores.overall:.3f}", flush=True)
        for budget in args.budgets if asked else ():
            scores = await ask_together(urls, prompts, model, asked=asked, budget=budget, args=args)
            results[("llm-bot (retrieval)", budget)].append(scores)
            results[("last-N window", budget)] += [last_n(q, budget) for q, _ in asked]
            print(f"  {len(asked)} questions @ {budget}: {scores.overall:.3f}", flush=True)
    print("\n" + formation_line("memory formation", imports) + "\n")
    if not args.formation_only:
        report({key: merge(parts) for key, parts in results.items()}, args.budgets)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LongMemEval JSON (e.g. dev.json)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--embeddings", default="local", choices=["local", "openai"])
    parser.add_argument(
        "--embedding-model", help="LLM_BOT_EMBEDDING_MODEL (default: the service's default)"
    )
    parser.add_argument("--only", nargs="*", help="question ids to run")
    parser.add_argument("--questions", type=int, default=0, help="first N questions only")
    parser.add_argument(
        "--max-items",
        type=int,
        default=None,
        help="LLM_BOT_RETRIEVAL_MAX_ITEMS (default: unset, the service's default)",
    )
    parser.add_argument(
        "--formation-only",
        action="store_true",
        help="import the haystacks and report memory formation; ask no question",
    )
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=1,
        help="above 1: every haystack imported first, then all questions asked on one new "
        "service, this many outstanding at once (32: LLM_BOT_PREFETCH's default)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm-up message: each user's first question meets its index not yet loaded",
    )
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    asyncio.run(main(arguments, json.loads(Path(arguments.data).read_text())))
