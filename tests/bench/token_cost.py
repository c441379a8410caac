"""Prompt tokens over long conversations: full history vs last-N window vs llm-bot.

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.token_cost --turns 100 1000

Answers SPEC 1's question (resending the whole history costs quadratically) with prompt
tokens **measured from the requests the model received**, for one synthetic conversation
per length (seeded, so the 100-turn one is the first 100 turns of the 1,000-turn one):

- ``full history``: every turn sends the system prompt, every previous user and assistant
  message and the current one;
- ``last-N window``: the system prompt and the most recent whole turns that fit in N = 8
  messages counting the current one (3 earlier exchanges + the current message), which is
  what llm-bot's reducer keeps with its default bound;
- ``llm-bot``: the real service and memory worker in this process (``bot()`` +
  ``running_worker()``), default window bounds (8 messages / 8000 chars), the context budget
  set by ``--max-context-tokens``/``--max-output-tokens`` (default input budget
  5280 - 1024 - 256 = 4000 tokens). Turns are sent one at a time (publish, wait for the
  candidate). Every ``--settle-every`` turns (default 10) and after the last one the bench
  waits until the worker is idle (memory-jobs queue empty and no job in flight for 5 polls
  0.1 s apart: ``settled()`` of the worker tests plus the in-flight check; at most
  ``--settle-timeout`` s), then records how many evicted turns are still pending
  compaction, which shows whether compaction keeps pace.

All three talk to the project's fake model, ``FakeModelServer`` with
``llm_bot.fake_model.memory_prompts.memory_responder`` (echo replies of the first 200
characters of the user message; summarizer and classifier answers for the worker); the
baselines through the real ``openai.AsyncOpenAI`` client. Prompt tokens are
``TiktokenCounter().count_messages(request.messages())`` of every chat request the fake
model recorded (for llm-bot counted as the responder answers each one, so the bodies can
be dropped as the run goes). llm-bot's reply requests are those without a JSON schema
(``schema_name(request) is None``); the worker's summarizer and classifier requests are
reported separately, without the ``response_format`` schema they carry (a provider bills
it too; its size is printed).

The fake summarizer appends to the rolling summary on every compaction and never shortens
it. ``--summary-words N`` cuts its rolling summary to the newest N words (as a summarizer
told "at most 120 words" would keep it short); the default (0) runs it as it is.

User messages are 40-60 tokens; five facts are planted at fixed early turns, and at the
last turn each counts as reachable when its marker (the name, the language, the order
number, "weekend", "300 baht") appears in the last request's prompt text; the report says
where (the window, or the memory block's section). ``--correct-at N`` changes the budget to
450 baht at turn N and reports whether the last prompt carries the new value and not the
old; ``--notable-every N`` makes every Nth message a complaint or request (notable events).
``--language th`` plants the facts in a Thai conversation (``thai_phrasebook.py``);
``--ask-in en`` asks about them in English; ``--ask-fact N`` asks about the Nth fact alone,
in one question. ``--last-prompt PATH`` writes llm-bot's last reply prompt as JSON, to read
what reached it and what did not.

Prompt caching: for every reply prompt, the tokens that repeat the previous reply prompt
from its start (what a provider's prompt cache could serve; also under OpenAI's rule of a
1,024-token minimum in 128-token blocks), which parts of the prompt changed, and
how many recalled lines carried over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import redis.asyncio as aioredis
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from llm_bot.bootstrap import Worker
from llm_bot.fake_model import FakeModelServer, RecordedRequest, ToolCalls
from llm_bot.fake_model.memory_prompts import memory_responder, schema_name
from llm_bot.logs import configure_logging
from llm_bot.memory.classification import classification_json_schema
from llm_bot.memory.compaction import SUMMARY_MAX_TOKENS, summarizer_json_schema
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.memory_message import read_memory
from llm_bot.memory.tokens import TiktokenCounter
from llm_bot.memory.working import ConversationProgress
from tests.bench.locomo_scoring import section_text
from tests.bench.plots import plot_prompt_tokens
from tests.support.events import message_event, new_id
from tests.support.harness import (
    TEST_KEY_PREFIX,
    Integrator,
    bot,
    running_worker,
    settings_for_test,
)
from tests.support.services import DEFAULT_AMQP_URL, DEFAULT_REDIS_URL, ServiceUrls

SYSTEM_PROMPT = (
    "You are the customer-support assistant of an online home-goods store. Answer briefly, "
    "politely and in the customer's language."
)
WINDOW_MESSAGES = 8
MIN_TOKENS, MAX_TOKENS = 40, 60
TENANT = "bench"

COUNTER = TiktokenCounter()


# ----------------------------------------------------------------- the conversation


@dataclass(frozen=True)
class Fact:
    turn: int
    name: str
    sentence: str
    marker: re.Pattern[str]


@dataclass(frozen=True)
class Phrasebook:
    """What a conversation of the bench is made of, in one language: the planted facts,
    the filler's parts, and the last message with ``--ask-facts``."""

    facts: tuple[Fact, ...]
    products: tuple[str, ...]
    openers: tuple[str, ...]
    questions: tuple[str, ...]
    details: tuple[str, ...]
    colors: tuple[str, ...]
    ask_facts: str
    ask_each: tuple[str, ...] = ()
    """One question per planted fact, in the order of ``facts`` (``--ask-fact N``)."""
    tokens: tuple[int, int] = (MIN_TOKENS, MAX_TOKENS)
    """A message's size range (cl100k tokens): Thai costs about a token a character."""


FACTS: tuple[Fact, ...] = (
    Fact(2, "name (Ann)", "By the way, my name is Ann.", re.compile(r"\bAnn\b")),
    Fact(4, "language (Thai)", "I speak Thai at home, so Thai answers are fine.", re.compile(r"\bthai\b", re.I)),
    Fact(7, "order number (4471)", "Also, my order number is 4471.", re.compile(r"4471")),
    Fact(11, "weekend delivery", "I prefer weekend delivery because I work on weekdays.", re.compile(r"weekend", re.I)),
    Fact(16, "budget (300 baht)", "My budget is 300 baht for this.", re.compile(r"300 baht", re.I)),
)  # fmt: skip

PRODUCTS = (
    "rice cooker", "electric kettle", "desk lamp", "water filter", "steam iron",
    "blender", "air purifier", "floor fan", "laundry basket", "cast iron pan",
    "bamboo cutting board", "thermos flask", "shoe rack", "bath towel set", "wall clock",
)  # fmt: skip
OPENERS = (
    "Hello again.", "Thanks for the quick answer.", "Okay, one more thing.", "Hi there.",
    "Sorry to bother you again.", "Good afternoon.", "I see, that helps.", "Quick question.",
)  # fmt: skip
QUESTIONS = (
    "Does the {p} come in a {c} color, and is there a larger size?",
    "How long is the warranty on the {p}, and does it cover accidental damage?",
    "Can I return the {p} if the box has been opened but it was never used?",
    "Is the {p} you sell the newer model or last year's version?",
    "What material is the {p} made of, and is it safe to clean with hot water?",
    "How many of the {p} do you have in stock right now at the main warehouse?",
    "Could you compare the {p} with the cheaper one on your home page?",
    "Does the {p} need any assembly, or does it arrive ready to use?",
)  # fmt: skip
DETAILS = (
    "I want to buy {n} of them for my family.",
    "My old one broke after about {n} years of daily use.",
    "A friend recommended your shop, she was very happy with her order.",
    "The product page does not say much about this.",
    "I would like to decide before the end of the month.",
    "It will be a gift, so the packaging matters a little.",
    "Our apartment is small, so the size really matters to me.",
    "I read a few reviews but they did not agree with each other.",
    "Please tell me if there is any promotion on it this month.",
    "I am also looking at a {c} {q} from the same brand.",
)  # fmt: skip
COLORS = ("white", "black", "green", "blue", "grey", "red")
ASK_FACTS = (
    "Before I order: can you remind me of my name, the language I speak at home, my order "
    "number, when I prefer delivery, and my budget?"
)
"""The last message with ``--ask-facts``: retrieval can only help when the message asks."""

ASK_EACH = (
    "What is my name?",
    "Which language do I speak at home?",
    "What is my order number?",
    "When do I prefer delivery?",
    "What is my budget?",
)
"""The last message with ``--ask-fact N``: one question, about the Nth fact."""

ENGLISH = Phrasebook(FACTS, PRODUCTS, OPENERS, QUESTIONS, DETAILS, COLORS, ASK_FACTS, ASK_EACH)


def _count(text: str) -> int:
    return COUNTER.count(text)


def _message(rng: random.Random, book: Phrasebook, lead: str = "") -> str:
    """One user message of MIN..MAX tokens (``lead`` first, then filler)."""
    low, high = book.tokens
    target = rng.randint(low, high)
    while True:
        product, other = rng.sample(book.products, 2)
        fill = {"p": product, "q": other, "c": rng.choice(book.colors), "n": rng.randint(2, 9)}
        parts = [rng.choice(book.openers), lead, rng.choice(book.questions).format(**fill)]
        for detail in rng.sample(book.details, len(book.details)):
            if _count(" ".join(filter(None, parts))) >= target:
                break
            parts.append(detail.format(**fill))
        text = " ".join(filter(None, parts))
        if low <= _count(text) <= high:
            return text


NOTABLE = (
    "I was charged twice for my last order, please refund one payment.",
    "Please cancel the second delivery, it was a mistake.",
    "I need a refund for the broken lid, it arrived cracked.",
)
"""With ``--notable-every N`` every Nth message leads with one of these (in turn): the fake
classifier scores them important, so they become notable events, as complaints and
requests do in real conversations (the events share the episodes section)."""

CORRECTION = "Actually, my budget is now 450 baht."
CORRECTED = re.compile(r"450 baht", re.I)
"""With ``--correct-at N`` the budget planted at turn 16 changes at turn N (the message
leads with :data:`CORRECTION`): the last prompt should carry 450 baht and not 300 baht."""


def conversation(
    turns: int,
    seed: int,
    *,
    book: Phrasebook = ENGLISH,
    ask_facts: Phrasebook | None = None,
    ask_fact: int = 0,
    correct_at: int = 0,
    notable_every: int = 0,
) -> list[str]:
    """The user messages of one conversation; the planted facts at their fixed turns; with
    ``ask_facts`` the last message asks about them (that book's ``ask_facts``: a book of
    another language asks about facts planted in ``book``'s); with ``correct_at``
    the budget changes at that turn (:data:`CORRECTION`)."""
    rng = random.Random(seed)
    planted = {fact.turn: fact.sentence for fact in book.facts}
    if notable_every:
        for n, turn in enumerate(range(notable_every, turns + 1, notable_every)):
            planted.setdefault(turn, NOTABLE[n % len(NOTABLE)])
    if correct_at:
        planted[correct_at] = CORRECTION
    markers = [*(f.marker for f in book.facts), CORRECTED]
    messages = []
    for turn in range(1, turns + 1):
        lead = planted.get(turn)
        text = _message(rng, book, lead or "")
        if lead is None and any(marker.search(text) for marker in markers):
            raise AssertionError(f"filler of turn {turn} contains a planted marker: {text}")
        messages.append(text)
    if ask_facts is not None:
        messages[-1] = ask_facts.ask_each[ask_fact - 1] if ask_fact else ask_facts.ask_facts
    return messages


def _books() -> dict[str, Phrasebook]:
    from tests.bench.thai_phrasebook import THAI  # noqa: PLC0415  # it imports this module

    return {"en": ENGLISH, "th": THAI}


# ----------------------------------------------------------------- measuring


@dataclass
class Measured:
    strategy: str
    per_turn: list[int] = field(default_factory=list)
    last_prompt: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.per_turn)

    @property
    def peak(self) -> int:
        return max(self.per_turn, default=0)

    facts: tuple[Fact, ...] = FACTS

    def reachable(self) -> dict[str, str | None]:
        """Per planted fact: where in the last prompt it was found (None: nowhere)."""
        return {fact.name: locate(fact.marker, self.last_prompt) for fact in self.facts}


def locate(marker: re.Pattern[str], messages: Sequence[dict[str, Any]]) -> str | None:
    """Every place holding the marker (``system prompt``, a memory section, ``window``),
    joined by " + " in the prompt's order; None when none does."""
    places: list[str] = []
    for message in messages:
        if (memory := read_memory(message)) is not None:
            parts = _memory_parts(memory)
            places += [name for name, text in parts.items() if marker.search(text)]
        elif marker.search(str(message.get("content") or "")):
            places.append("system prompt" if message.get("role") == "system" else "window")
    return " + ".join(dict.fromkeys(places)) or None


def window_of(history: list[ChatCompletionMessageParam]) -> list[ChatCompletionMessageParam]:
    """The most recent whole turns within WINDOW_MESSAGES messages, the current one included
    (``history`` alternates user/assistant and ends with the current user message)."""
    keep = 1 + 2 * ((WINDOW_MESSAGES - 1) // 2)
    return history[-keep:]


async def baseline(
    model: FakeModelServer, messages: list[str], *, windowed: bool, progress_every: int
) -> Measured:
    """Full history (or the last-N window) through the real OpenAI client."""
    result = Measured("last-N window (N = 8)" if windowed else "full history")
    client = AsyncOpenAI(base_url=model.base_url, api_key="bench", max_retries=0, timeout=60)
    system: ChatCompletionMessageParam = {"role": "system", "content": SYSTEM_PROMPT}
    history: list[ChatCompletionMessageParam] = []
    started = time.perf_counter()
    try:
        for turn, text in enumerate(messages, start=1):
            history.append({"role": "user", "content": text})
            sent = window_of(history) if windowed else history
            model.clear()
            reply = await client.chat.completions.create(
                model="fake-model", messages=[system, *sent]
            )
            (request,) = model.chat_requests()
            result.per_turn.append(COUNTER.count_messages(request.messages()))
            history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
            if turn == len(messages):
                result.last_prompt = request.messages()
            if turn % progress_every == 0:
                print(f"  {result.strategy}: turn {turn}", flush=True)
    finally:
        await client.close()
    model.clear()
    result.seconds = time.perf_counter() - started
    return result


def _serialized(messages: Sequence[dict[str, Any]]) -> str:
    """The messages as a provider sees their order: role, then content, one after another."""
    return "".join(f"<|{m.get('role')}|>{m.get('content') or ''}" for m in messages)


def repeated_prefix(previous: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]]) -> int:
    """Tokens of ``current`` that repeat ``previous`` from the start: what a provider's
    prompt cache could serve (it caches exact prefixes)."""
    before, now = _serialized(previous), _serialized(current)
    same = 0
    for a, b in zip(before, now, strict=False):
        if a != b:
            break
        same += 1
    return COUNTER.count(now[:same]) if same else 0


def openai_cached(prefix_tokens: int) -> int:
    """What OpenAI's prompt cache would serve of a repeated prefix: nothing under 1,024
    tokens, else whole 128-token blocks."""
    return 0 if prefix_tokens < 1024 else prefix_tokens // 128 * 128


def _memory_parts(memory: dict[str, Any]) -> dict[str, str]:
    """The memory document's sections, each as its items one per line (a recalled line
    with its date's group before it)."""
    return {name: section_text(body) for name, body in memory.items()}


def _system_parts(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The prompt's fixed part: ``head`` (the system prompt) and the memory message's
    sections (``profile``, ``facts``, ``summary``, ``episodes``, ``recalled``)."""
    parts: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "system":
            parts["head"] = str(message.get("content") or "")
        elif (memory := read_memory(message)) is not None:
            parts |= _memory_parts(memory)
    return parts


def changed_sections(
    previous: Sequence[dict[str, Any]], current: Sequence[dict[str, Any]]
) -> list[str]:
    """The parts (system prompt, memory sections) that differ between two consecutive prompts."""
    if not previous:
        return []
    before, now = _system_parts(previous), _system_parts(current)
    return sorted(name for name in before.keys() | now.keys() if before.get(name) != now.get(name))


class Recorder:
    """The fake model's responder, counting every chat request it answers.

    The fake model calls its responder once for each chat request it recorded (no script
    steps are queued), so counting here is counting the recorded requests; it lets the
    bench drop the recorded bodies as it goes (a stalled compaction makes them large).
    """

    def __init__(self, summary_words: int) -> None:
        self.summary_words = summary_words
        self.replies: list[int] = []
        self.last_reply: list[dict[str, Any]] = []
        self.summarizer: list[int] = []
        self.summarizer_turns: list[int] = []
        self.classifier: list[int] = []
        self.oversize_summaries = 0
        self.prefix: list[int] = []
        """Per reply request: tokens of its longest common prefix with the previous one."""
        self.section_changes: dict[str, int] = {}
        """Per part of the prompt's fixed part: reply requests where it differed from the
        previous request's (the memory sections, ``head`` for the system prompt)."""
        self._previous: list[dict[str, Any]] = []
        self.recalled_kept: list[tuple[int, int, int]] = []
        """Per reply request after the first: (recalled lines, lines also in the previous
        prompt's recalled section, lines of the unchanged start of the section)."""

    def __call__(self, request: RecordedRequest) -> str | ToolCalls:
        messages = request.messages()
        tokens = COUNTER.count_messages(messages)
        name = schema_name(request)
        reply = memory_responder(request)
        if name is None:
            self.replies.append(tokens)
            self.prefix.append(repeated_prefix(self._previous, messages))
            for part in changed_sections(self._previous, messages):
                self.section_changes[part] = self.section_changes.get(part, 0) + 1
            if self._previous:
                before = _system_parts(self._previous).get("recalled", "").splitlines()
                now = _system_parts(messages).get("recalled", "").splitlines()
                start = next(
                    (i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b),
                    min(len(before), len(now)),
                )
                self.recalled_kept.append((len(now), len(set(now) & set(before)), start))
            self._previous = messages
            self.last_reply = messages
        elif name == "memory_compaction":
            self.summarizer.append(tokens)
            turns = json.loads(request.last_user_text())["turns"]
            self.summarizer_turns.append(len(set(re.findall(r"^turn (\d+) ", turns, re.M))))
            assert isinstance(reply, str)  # the summarizer answers JSON text
            reply = self._cap(reply)
            if COUNTER.count(json.loads(reply)["rolling_summary"]) > SUMMARY_MAX_TOKENS:
                self.oversize_summaries += 1
        else:
            self.classifier.append(tokens)
        return reply

    def _cap(self, reply: str) -> str:
        """With ``summary_words``: the rolling summary cut to its newest words, as a
        summarizer told "at most 120 words" would keep it short."""
        if not self.summary_words:
            return reply
        data = json.loads(reply)
        data["rolling_summary"] = " ".join(data["rolling_summary"].split()[-self.summary_words :])
        return json.dumps(data)


@dataclass
class BotRun:
    measured: Measured
    budget: int
    recorder: Recorder
    service_counts_differ: int
    schema_tokens: dict[str, int]
    settles: list[float]
    lag: list[tuple[int, int]]
    """(turn, evicted turns still pending compaction once the worker was idle)."""
    not_idle: list[int]
    final: ConversationProgress
    ltm: dict[str, int]
    dead_letters: dict[str, int]

    @property
    def worker_total(self) -> int:
        return sum(self.recorder.summarizer) + sum(self.recorder.classifier)


async def worker_idle(client: Integrator, worker: Worker) -> bool:
    depth = await client.queue_depth(client.settings.memory_queue)
    return depth == 0 and worker.consumer.in_flight == 0


async def settle(client: Integrator, worker: Worker, within: float) -> bool:
    """Wait until the worker is idle: memory-jobs queue empty and no job in flight, for 5
    polls 0.1 s apart (``settled()`` of the worker tests, plus the in-flight check)."""
    quiet = 0
    try:
        async with asyncio.timeout(within):
            while quiet < 5:
                quiet = quiet + 1 if await worker_idle(client, worker) else 0
                await asyncio.sleep(0.1)
    except TimeoutError:
        return False
    return True


async def llm_bot(urls: ServiceUrls, messages: list[str], args: argparse.Namespace) -> BotRun:
    recorder = Recorder(args.summary_words)
    async with FakeModelServer(responder=recorder) as model:
        settings = settings_for_test(
            urls,
            model.base_url,
            system_prompt=SYSTEM_PROMPT,
            max_context_tokens=args.max_context_tokens,
            max_output_tokens=args.max_output_tokens,
            retry_base_seconds=0.05,
            log_level=args.log_level,
        )
        key = ConversationKey(TENANT, new_id("u"), new_id("c"))
        settles: list[float] = []
        lag: list[tuple[int, int]] = []
        not_idle: list[int] = []
        service_counts: list[int] = []
        started = time.perf_counter()
        async with bot(settings) as (_service, client), running_worker(settings) as worker:
            for turn, text in enumerate(messages, start=1):
                event = message_event(
                    tenant=key.tenant_id,
                    user=key.user_id,
                    conversation=key.conversation_id,
                    text=text,
                )
                await client.publish(event)
                candidate = (await client.next_candidate(within=60)).body
                service_counts.append(int(candidate["memory"]["context_tokens"]))
                model.requests.clear()  # counted by the recorder already
                if turn % args.settle_every == 0 or turn == len(messages):
                    waited = time.perf_counter()
                    if not await settle(client, worker, args.settle_timeout):
                        not_idle.append(turn)
                    settles.append(time.perf_counter() - waited)
                    state = await worker.progress.load(key)
                    pending = len(state.memory.pending_compaction) if state.memory else 0
                    lag.append((turn, pending))
                if turn % args.progress_every == 0:
                    print(
                        f"  llm-bot: turn {turn}, {lag[-1][1] if lag else 0} turns pending "
                        f"compaction, {time.perf_counter() - started:.0f} s",
                        flush=True,
                    )
            final = await worker.progress.load(key)
            ltm = {
                "profile": len(await worker.ltm.profile(key.tenant_id, key.user_id)),
                "facts": len(await worker.ltm.facts(key.tenant_id, key.user_id)),
                "episodes": len(await worker.ltm.episodes(key.tenant_id, key.user_id)),
            }
            dead_letters = {
                "events": await _depth(client, settings.dlq),
                "memory jobs": await _depth(client, settings.memory_dlq),
            }
        seconds = time.perf_counter() - started
    result = Measured("llm-bot", per_turn=recorder.replies, last_prompt=recorder.last_reply)
    result.seconds = seconds
    if len(recorder.replies) != len(messages):
        print(f"  ODD: {len(recorder.replies)} reply requests for {len(messages)} turns")
    return BotRun(
        measured=result,
        budget=settings.context_budget().input_budget,
        recorder=recorder,
        service_counts_differ=sum(
            a != b for a, b in zip(recorder.replies, service_counts, strict=False)
        ),
        schema_tokens={
            "memory_compaction": _schema_tokens("memory_compaction", summarizer_json_schema()),
            "classification": _schema_tokens("classification", classification_json_schema()),
        },
        settles=settles,
        lag=lag,
        not_idle=not_idle,
        final=final,
        ltm=ltm,
        dead_letters=dead_letters,
    )


async def _depth(client: Integrator, queue: str) -> int:
    try:
        return await client.queue_depth(queue)
    except aio_pika.exceptions.ChannelClosed:  # never declared
        return 0


def _schema_tokens(name: str, schema: dict[str, Any]) -> int:
    return COUNTER.count(json.dumps({"name": name, "schema": schema, "strict": True}))


# ----------------------------------------------------------------- reporting


def _facts_cell(measured: Measured) -> str:
    found = measured.reachable()
    return f"{sum(v is not None for v in found.values())}/{len(found)}"


def report(
    turns: int,
    settle_every: int,
    full: Measured,
    window: Measured,
    run: BotRun,
    *,
    correct_at: int = 0,
) -> None:
    bot_m, rec = run.measured, run.recorder
    print(f"\n## {turns} turns\n")
    print("| strategy | total prompt tokens | max per turn | ratio to full history | planted facts reachable at last turn |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for label, m in (
        (full.strategy, full),
        (window.strategy, window),
        ("llm-bot (reply requests)", bot_m),
    ):
        print(
            f"| {label} | {m.total:,} | {m.peak:,} | {m.total / full.total:.4f} | {_facts_cell(m)} |"
        )
    worker = run.worker_total
    peak = max([*rec.summarizer, *rec.classifier], default=0)
    print(
        f"| llm-bot memory worker ({len(rec.summarizer)} summarizer + {len(rec.classifier)} "
        f"classifier requests) | {worker:,} | {peak:,} (per request) | "
        f"{worker / full.total:.4f} | - |"
    )
    both = bot_m.total + worker
    print(f"| llm-bot replies + worker | {both:,} | - | {both / full.total:.4f} | - |")
    shared = sum(rec.prefix)
    billable = sum(openai_cached(n) for n in rec.prefix)
    print(
        f"\nrepeated prefix: {shared:,} of {bot_m.total:,} reply-prompt tokens "
        f"({shared / max(1, bot_m.total):.1%}) repeat the previous turn's prompt from its "
        f"start; system-message parts that changed from one reply prompt to the next "
        f"(of {max(0, len(rec.prefix) - 1)}): "
        + ", ".join(f"{k} {v}" for k, v in sorted(rec.section_changes.items(), key=lambda x: -x[1]))
    )
    print(
        f"cacheable under OpenAI's rule (a repeated prefix of at least 1,024 tokens, in "
        f"128-token blocks): {billable:,} tokens ({billable / max(1, bot_m.total):.1%})"
    )
    if rec.recalled_kept:
        lines = sum(n for n, _, _ in rec.recalled_kept)
        print(
            f"recalled lines per prompt {lines / len(rec.recalled_kept):.1f}, of which also in "
            f"the previous prompt {sum(k for _, k, _ in rec.recalled_kept) / max(1, lines):.0%}, "
            f"unchanged from the section's start "
            f"{sum(s for _, _, s in rec.recalled_kept) / max(1, lines):.0%}"
        )
    over = [t for t, n in enumerate(bot_m.per_turn, start=1) if n > run.budget]
    print(f"\nllm-bot input budget: {run.budget} tokens")
    print(
        f"  every reply prompt under budget: {'yes' if not over else 'NO'} "
        f"(max {bot_m.peak}, {len(over)} turns over{': ' + str(over[:10]) if over else ''})"
    )
    tail = bot_m.per_turn[-10:]
    print(
        f"  mean per turn: llm-bot {bot_m.total / max(1, len(bot_m.per_turn)):.0f} "
        f"(last 10 turns {sum(tail) / max(1, len(tail)):.0f}), "
        f"last-N {window.total / max(1, len(window.per_turn)):.0f}; the service's own "
        f"context_tokens differ from the recorded count on {run.service_counts_differ} turns"
    )
    for name, where in bot_m.reachable().items():
        print(f"  fact {name}: {where or 'NOT in the last prompt'}")
    if correct_at:
        new = locate(CORRECTED, bot_m.last_prompt)
        print(
            f"  correction at turn {correct_at} (budget 300 -> 450 baht): 450 baht "
            f"{'in ' + new if new else 'NOT in the last prompt'}; 300 baht "
            + (f"still in {old}" if (old := locate(FACTS[4].marker, bot_m.last_prompt)) else "gone")
        )
    print(
        f"  worker: summarizer {sum(rec.summarizer):,} tokens in {len(rec.summarizer)} requests "
        f"(largest {max(rec.summarizer, default=0):,} tokens carrying "
        f"{max(rec.summarizer_turns, default=0)} turns; {rec.oversize_summaries} answers with "
        f"a rolling summary over {SUMMARY_MAX_TOKENS} tokens), classifier "
        f"{sum(rec.classifier):,} tokens in {len(rec.classifier)} requests; not counted: the "
        f"response_format schema every worker request carries (~"
        f"{run.schema_tokens['memory_compaction']} / ~{run.schema_tokens['classification']} "
        f"tokens)"
    )
    final = run.final
    window_turns = sorted({m.turn for m in final.memory.messages}) if final.memory else []
    pending = list(final.memory.pending_compaction) if final.memory else []
    summary = final.memory.summary if final.memory else ""
    print(
        f"  at the end: last turn {final.last_turn}, compacted through {final.compacted_through}, "
        f"classified through {final.classified_through}, window turns {window_turns}, "
        f"{len(pending)} turns pending compaction, rolling summary {len(summary)} chars, "
        f"long-term items {run.ltm}, dead letters {run.dead_letters}"
    )
    behind = [(t, p) for t, p in run.lag if p]
    print(
        f"  settles (every {settle_every} turns and at the end): {len(run.settles)}, "
        f"{sum(run.settles):.1f} s in all, longest {max(run.settles, default=0):.1f} s, "
        f"worker not idle within the timeout at turns {run.not_idle or 'none'}; "
        f"compaction behind once idle at {len(behind)} settles"
        + (
            f" (first at turn {behind[0][0]}, worst {max(p for _, p in behind)} turns)"
            if behind
            else ""
        )
    )
    print(
        f"  run time: full history {full.seconds:.0f} s, last-N {window.seconds:.0f} s, "
        f"llm-bot {bot_m.seconds:.0f} s"
    )


def plot_per_turn(path: Path, turns: int, several: bool, strategies: list[Measured]) -> None:
    """``--plot PATH``: each strategy's prompt tokens per turn (llm-bot: its reply requests);
    with several ``--turns``, one file per length (``PATH`` with ``-<turns>`` before the
    suffix)."""
    target = path.with_name(f"{path.stem}-{turns}{path.suffix}") if several else path
    plot_prompt_tokens(
        target,
        f"Prompt tokens per turn, {turns:,}-turn conversation",
        {m.strategy: m.per_turn for m in strategies},
    )


async def run(args: argparse.Namespace) -> None:
    urls = ServiceUrls(
        os.environ.get("AMQP_URL", DEFAULT_AMQP_URL), os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    )
    try:
        for turns in args.turns:
            await one_length(urls, turns, args)
    finally:
        redis = aioredis.from_url(urls.redis_url)
        async for name in redis.scan_iter(match=f"{TEST_KEY_PREFIX}:*", count=1000):
            await redis.unlink(name)
        await redis.aclose()


async def one_length(urls: ServiceUrls, turns: int, args: argparse.Namespace) -> None:
    books = _books()
    book = books[args.language]
    messages = conversation(
        turns,
        args.seed,
        book=book,
        ask_facts=books[args.ask_in or args.language] if args.ask_facts else None,
        ask_fact=args.ask_fact,
        correct_at=args.correct_at,
        notable_every=args.notable_every,
    )
    sizes = [_count(m) for m in messages]
    print(
        f"\n# {turns}-turn conversation (seed {args.seed}"
        f"{', last message asks about the facts' if args.ask_facts else ''}): user messages "
        f"{min(sizes)}-{max(sizes)} tokens, mean {sum(sizes) / len(sizes):.1f}",
        flush=True,
    )
    async with FakeModelServer(responder=memory_responder) as model:
        full = await baseline(model, messages, windowed=False, progress_every=args.progress_every)
        window = await baseline(model, messages, windowed=True, progress_every=args.progress_every)
    bot_run = await llm_bot(urls, messages, args)
    full.facts = window.facts = bot_run.measured.facts = book.facts
    report(turns, args.settle_every, full, window, bot_run, correct_at=args.correct_at)
    if args.plot is not None:
        plot_per_turn(args.plot, turns, len(args.turns) > 1, [full, window, bot_run.measured])
    if args.last_prompt is not None:
        path = args.last_prompt.with_name(
            f"{args.last_prompt.stem}-{turns}{args.last_prompt.suffix}"
        )
        path.write_text(json.dumps(bot_run.measured.last_prompt, ensure_ascii=False, indent=1))
        print(f"  llm-bot's last prompt written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--ask-facts", action="store_true", help="the last message asks about the planted facts"
    )
    parser.add_argument(
        "--language",
        choices=("en", "th"),
        default="en",
        help="the conversation's language (th: the planted facts and filler in Thai)",
    )
    parser.add_argument(
        "--ask-in",
        choices=("en", "th"),
        help="with --ask-facts, ask in this language (default: the conversation's)",
    )
    parser.add_argument(
        "--ask-fact",
        type=int,
        choices=range(1, 6),
        default=0,
        help="with --ask-facts, ask about the Nth planted fact alone, in one question",
    )
    parser.add_argument(
        "--correct-at",
        type=int,
        default=0,
        help="the planted budget changes to 450 baht at this turn (0: never)",
    )
    parser.add_argument(
        "--notable-every",
        type=int,
        default=0,
        help="every Nth message leads with a complaint or request (a notable event; 0: none)",
    )
    parser.add_argument("--max-context-tokens", type=int, default=5280)
    parser.add_argument("--max-output-tokens", type=int, default=1024)
    parser.add_argument("--settle-every", type=int, default=10)
    parser.add_argument("--settle-timeout", type=float, default=30.0)
    parser.add_argument("--progress-every", type=int, default=100)
    parser.add_argument(
        "--plot", type=Path, metavar="PATH", help="write a PNG of prompt tokens per turn"
    )
    parser.add_argument(
        "--last-prompt",
        type=Path,
        metavar="PATH",
        help="write llm-bot's last reply prompt as JSON (PATH with the length added: x-100.json)",
    )
    parser.add_argument(
        "--summary-words",
        type=int,
        default=0,
        help="cut the fake summarizer's rolling summary to its newest N words (0: as is)",
    )
    parser.add_argument(
        "--log-level", default="error", help="the service's and worker's logs (stderr)"
    )
    args = parser.parse_args()
    configure_logging(level=args.log_level, fmt="console")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
