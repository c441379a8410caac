"""Context assembly: what the model sees (SPEC 5.3), deterministic and within a token budget.

Order: the system prompt (the leading ``system`` message, byte for byte the operator's,
left out when empty), the memory message, the window oldest first, the current user
message (the window's last message). Memory is data, never an instruction: it goes in a
``user`` message of its own after the system prompt, a fixed framing line and a fenced
JSON document of sanitised text (:mod:`~llm_bot.memory.memory_message` says why), left
out when there is nothing to remember; the operator's text is the only system message.

With ``episodes_tokens`` (the reply path gives ``EPISODES_SHARE`` of the input budget), the
episodic summaries offered are the latest, newest first, while their lines fit in it (the
latest is always offered): they carry what happened lately, whatever the message; what is
relevant to it comes back by recall (the index holds every episode), and at a small
budget recent episodes would otherwise keep the room recall needs (the latest five took
230 of 1,000 tokens in a LoCoMo prompt).

Budget (``input_budget = max_context_tokens - max_output_tokens - safety_margin``, counted
with ``TokenCounter.count_messages`` over the whole prompt, whatever the script: Thai, CJK
and emoji cost far more tokens per character than English). When over, this goes, in this
order, until the prompt fits:

1. long-term facts, notable events and recalled items, lowest score first (facts score
   ``salience * confidence``, events ``importance``, recalled items their retrieval
   relevance in [0, 1]; ties: older first, then id): they share the budget by score;
   when this stage alone made the prompt fit, the items it dropped are then put back,
   best first, each that still fits (a long line's drop can leave room for shorter ones);
2. episodic summaries, oldest first;
3. the rolling summary, shortened from its start (its most recent end is kept, prefixed
   with "…"): word by word, then character by character within its last word, then removed;
4. profile attributes, alphabetically last key first;
5. the oldest whole turns of the window (from the prompt only: they stay in memory, and
   compaction sees them); never the current turn, so a tool call keeps its results;
6. the current user message, shortened in the middle with a visible marker
   (:func:`~llm_bot.memory.shortening.shorten_middle`); ``shortened`` says so.

Only a system prompt that alone exceeds the budget can leave the prompt over it
(``over_budget``: a configuration error, logged by the caller). Each stage is searched by
bisection, so n items cost O(log n) counts, not O(n).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from llm_bot.context_budget import ContextBudget, default_context_budget
from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.memory_block import (
    MemoryItem,
    MemoryItems,
    collect_items,
    render_items,
    render_memory_block,
)
from llm_bot.memory.memory_message import memory_message
from llm_bot.memory.messages import ChatMessage, PromptMessage
from llm_bot.memory.recall_budget import GROUP_OVERHEAD_TOKENS, LINE_OVERHEAD_TOKENS
from llm_bot.memory.shortening import shorten_middle
from llm_bot.memory.tokens import TokenCounter
from llm_bot.memory.tool_rounds import canonical_tool_sequence
from llm_bot.memory.topic_state import RecalledRecord

ELLIPSIS = "…"


@dataclass(frozen=True)
class AssembledContext:
    """The prompt sent to the model, with what it cost and what memory was left out."""

    messages: list[PromptMessage]
    tokens: int
    """``counter.count_messages(messages)``."""
    budget: int
    over_budget: bool
    """True only when the system prompt alone exceeds the budget (a configuration error):
    the prompt then has no memory, only the current turn, its message shortened."""
    long_term_items: int
    """Long-term items rendered: profile attributes, facts, episodes and events."""
    summary_included: bool
    """Whether any of the rolling summary (maybe shortened) was rendered."""
    dropped: Mapping[str, int]
    """Left out for the budget: ``facts``, ``events``, ``recalled``, ``episodes``,
    ``profile`` (items), ``summary_chars`` (characters cut from the start of the sanitised
    summary) and ``window_turns`` (oldest window turns left out of the prompt)."""
    recalled_items: int = 0
    """Recalled items rendered."""
    window_messages: int = 0
    """Messages of the window in the prompt (the current one included)."""
    shortened: bool = False
    """Whether the current message was shortened to fit."""


@dataclass(frozen=True)
class _Plan:
    """Memory left out: the first n of each stage's drop order."""

    scored: int = 0
    episodes: int = 0
    summary: int = 0
    profile: int = 0
    window: int = 0
    keep: int | None = None
    """Characters of the current message kept (None: all of it)."""
    refilled: frozenset[int] = frozenset()
    """Of the first ``scored`` (dropped), those put back in the room their drop left."""


class _Assembler:
    """One assembly: the fixed parts, the drop orders, and memoised counts per plan."""

    def __init__(
        self,
        *,
        system_prompt: str,
        items: MemoryItems,
        window: Sequence[ChatMessage],
        counter: TokenCounter,
    ) -> None:
        self.head = system_prompt.strip()
        self.items = items
        self.counter = counter
        current = window[-1].turn if window else 0
        self.turns = [
            [m.to_openai() for m in group]
            for _, group in itertools.groupby(
                (m for m in window if m.turn != current), key=lambda m: m.turn
            )
        ]
        self.current = [m.to_openai() for m in window if m.turn == current]
        self.target = _shortening_target(self.current)
        self.scored = sorted(
            (*items.facts, *items.events, *items.recalled),
            key=lambda i: (i.score, i.created_at, i.id, i.kind, i.uid),
        )
        self.episodes = sorted(items.episodes, key=_oldest_first)
        self.profile = list(reversed(items.profile))
        self.cuts = _summary_cuts(items.summary)
        self._counts: dict[_Plan, int] = {}

    @property
    def stage_sizes(self) -> tuple[int, int, int, int, int]:
        summary_steps = len(self.cuts) + 1 if self.items.summary else 0
        return (
            len(self.scored),
            len(self.episodes),
            summary_steps,
            len(self.profile),
            len(self.turns),
        )

    def omitted(self, plan: _Plan) -> list[MemoryItem]:
        return [
            *(item for n, item in enumerate(self.scored[: plan.scored]) if n not in plan.refilled),
            *self.episodes[: plan.episodes],
            *self.profile[: plan.profile],
        ]

    def summary(self, plan: _Plan) -> str:
        if plan.summary == 0:
            return self.items.summary
        if plan.summary > len(self.cuts):
            return ""
        return ELLIPSIS + self.items.summary[self.cuts[plan.summary - 1] :]

    def summary_chars_dropped(self, plan: _Plan) -> int:
        if plan.summary == 0:
            return 0
        if plan.summary > len(self.cuts):
            return len(self.items.summary)
        return self.cuts[plan.summary - 1]

    def messages(self, plan: _Plan) -> list[PromptMessage]:
        """The prompt with the memory ``plan`` leaves in."""
        omit = {item.uid for item in self.omitted(plan)}
        block = render_items(self.items, omit=omit, summary=self.summary(plan))
        head: list[PromptMessage] = [{"role": "system", "content": self.head}] if self.head else []
        memory = [memory_message(block)] if block else []
        window = [message for turn in self.turns[plan.window :] for message in turn]
        return head + memory + window + self._current(plan.keep)

    def _current(self, keep: int | None) -> list[PromptMessage]:
        if keep is None or self.target is None:
            return self.current
        current = list(self.current)
        message = dict(current[self.target])
        message["content"] = shorten_middle(str(message["content"]), keep)
        current[self.target] = message
        return current

    def target_length(self) -> int:
        return len(str(self.current[self.target]["content"])) if self.target is not None else 0

    def tokens(self, plan: _Plan) -> int:
        if plan not in self._counts:
            self._counts[plan] = self.counter.count_messages(self.messages(plan))
        return self._counts[plan]


def assemble_context(
    *,
    system_prompt: str,
    bundle: LongTermBundle,
    summary: str,
    window: Sequence[ChatMessage],
    budget: ContextBudget,
    counter: TokenCounter,
    recalled: Sequence[RecalledRecord] = (),
    carried: Collection[str] = (),
    episodes_tokens: int | None = None,
) -> AssembledContext:
    """The prompt for the model: ``window`` ends with the current turn (its user message,
    or the tool results that continue it); ``recalled`` is what retrieval found,
    ``carried`` the ids of those the previous turn recalled too (shown first);
    ``episodes_tokens``, what the latest episodes may take (None: every one of the bundle's).

    Raises ValueError when the window holds a ``system`` message (the leading system
    message is the only one the prompt may have).
    """
    if any(message.role == "system" for message in window):
        raise ValueError("the window must not contain system messages")
    window = canonical_tool_sequence(window)  # never half a tool exchange in a prompt
    items = collect_items(bundle, summary, recalled, carried)
    if episodes_tokens is not None:
        items = latest_episodes(items, episodes_tokens, counter)
    asm = _Assembler(
        system_prompt=system_prompt,
        items=items,
        window=window,
        counter=counter,
    )
    limit = budget.input_budget
    sizes = asm.stage_sizes
    everything = _Plan(*sizes)
    if asm.tokens(everything) <= limit:
        plan = _fit(_Plan(), sizes, lambda p: asm.tokens(p) <= limit)
        return _result(asm, _refill(asm, plan, limit), limit, over_budget=False)
    # Everything droppable is gone and the current turn is still too long: shorten its
    # message, keeping as many characters as fit (bisection; 0 keeps the marker only).
    low, high = 0, asm.target_length()
    if asm.tokens(replace(everything, keep=0)) > limit:
        return _result(asm, replace(everything, keep=0), limit, over_budget=True)
    while high - low > 1:
        middle = (low + high) // 2
        if asm.tokens(replace(everything, keep=middle)) <= limit:
            low = middle
        else:
            high = middle
    return _result(asm, replace(everything, keep=low), limit, over_budget=False)


EPISODES_SHARE = 0.1
"""Of the input budget, what the latest episodic summaries may take on the reply path (see
the module's docstring): 100 tokens of 1,000, 400 of 4,000 (the bundle holds at most five)."""


def _oldest_first(item: MemoryItem) -> tuple[str, str, int]:
    """An episode's place, oldest first (ties by id, then uid)."""
    return (item.created_at, item.id, item.uid)


def latest_episodes(items: MemoryItems, tokens: int, counter: TokenCounter) -> MemoryItems:
    """``items`` with only their latest episodes: newest first, each while the lines so far
    fit in ``tokens`` (the latest whatever its length); the events merged with them stay."""
    newest_first = sorted(items.episodes, key=_oldest_first, reverse=True)
    spent = 0
    offered: set[int] = set()
    for item in newest_first:
        spent += counter.count(item.text) + LINE_TOKENS
        if offered and spent > tokens:
            break
        offered.add(item.uid)
    if len(offered) == len(newest_first):
        return items
    episodic = tuple(i for i in items.episodic if i.kind != "episodes" or i.uid in offered)
    return replace(items, episodic=episodic)


def _fit(plan: _Plan, sizes: tuple[int, ...], fits: Callable[[_Plan], bool]) -> _Plan:
    """The plan that drops least, stage by stage: a stage is exhausted before the next one
    starts, and within a stage the smallest fitting count is found by bisection."""
    if fits(plan):
        return plan
    fields = ("scored", "episodes", "summary", "profile", "window")
    for field, size in zip(fields, sizes, strict=True):
        if size == 0:
            continue
        if not fits(exhausted := _dropping(plan, field, size)):
            plan = exhausted
            continue
        low, high = 0, size  # fits(low) is known false, fits(high) true
        while high - low > 1:
            middle = (low + high) // 2
            if fits(_dropping(plan, field, middle)):
                high = middle
            else:
                low = middle
        return _dropping(plan, field, high)
    return plan


def _dropping(plan: _Plan, stage: str, count: int) -> _Plan:
    """``plan`` with the first ``count`` of ``stage`` left out."""
    counts: dict[str, Any] = {stage: count}  # a stage is one of the plan's int fields
    return replace(plan, **counts)


def _refill(asm: _Assembler, plan: _Plan, limit: int) -> _Plan:
    """``plan`` with the scored items it drops put back, best first, each that still fits:
    the drop order cuts at the first item whose removal makes the prompt fit, so a long
    line can leave room that shorter, lower-scored ones fill (greedy packing by score, as
    a knapsack's greedy fill skips what does not fit and goes on). Only when the scored
    stage alone was cut: nothing of a later stage goes while an item is put back. The
    first put back into a prompt without a memory message is counted with the whole
    prompt (it brings the message's framing), the others by their line's tokens and
    ``LINE_TOKENS`` (and a recalled item the first of its date, by its date's group too:
    ``GROUP_TOKENS``); one count of the prompt checks the whole, and the last put
    back go first while it does not fit."""
    if plan.scored == 0 or plan != _Plan(scored=plan.scored):
        return plan
    room = limit - asm.tokens(plan)
    refilled: list[int] = []
    framed = bool(  # the memory message is in the prompt: a line costs its line only
        plan.scored < len(asm.scored) or asm.items.summary or asm.episodes or asm.profile
    )
    omitted = {item.uid for item in asm.omitted(plan)}
    groups = {i.group for i in asm.items.recalled if i.uid not in omitted}
    for index in reversed(range(plan.scored)):
        item = asm.scored[index]
        cost = asm.counter.count(item.text) + LINE_TOKENS
        if item.kind == "recalled" and item.group not in groups:
            cost += asm.counter.count(item.group) + GROUP_TOKENS
        if cost > room:
            continue
        if not refilled and not framed:  # counted whole: it brings the message's framing
            if (spent := asm.tokens(replace(plan, refilled=frozenset({index})))) > limit:
                continue
            room = limit - spent
        else:
            room -= cost
        refilled.append(index)
        groups.add(item.group)
    while refilled and asm.tokens(replace(plan, refilled=frozenset(refilled))) > limit:
        refilled.pop()
    return replace(plan, refilled=frozenset(refilled))


LINE_TOKENS = LINE_OVERHEAD_TOKENS + 1
"""What a line adds to the memory message besides its text (its JSON quotes, comma and
line break), and one token more: the pieces at its edges may not merge as counted alone
(a line put back, an episode within its share)."""
GROUP_TOKENS = GROUP_OVERHEAD_TOKENS + 1
"""What a recalled date's group adds besides its date (its key's quotes and colon, the
brackets, line breaks), and one token more, as for ``LINE_TOKENS``."""


def _summary_cuts(summary: str) -> list[int]:
    """Where the summary may be cut, ascending (so its kept end shrinks): after each space,
    then after each character of the last word."""
    words = [index + 1 for index, char in enumerate(summary) if char == " "]
    last_word = words[-1] if words else 0
    return words + list(range(last_word + 1, len(summary)))


def _shortening_target(current: Sequence[PromptMessage]) -> int | None:
    """The message of the current turn to shorten: its last user message, else the one
    with the longest text (a turn continued by tool results)."""
    users = [i for i, m in enumerate(current) if m.get("role") == "user"]
    if users:
        return users[-1]
    if not current:
        return None
    return max(range(len(current)), key=lambda i: len(str(current[i].get("content") or "")))


def _result(asm: _Assembler, plan: _Plan, limit: int, *, over_budget: bool) -> AssembledContext:
    omitted = asm.omitted(plan)
    kinds = ("facts", "events", "recalled")
    dropped = {kind: sum(1 for i in omitted if i.kind == kind) for kind in kinds}
    dropped |= {"episodes": plan.episodes, "profile": plan.profile, "window_turns": plan.window}
    dropped["summary_chars"] = asm.summary_chars_dropped(plan)
    items = asm.items
    total = len(items.profile) + len(items.facts) + len(items.episodic)
    long_term_omitted = sum(1 for i in omitted if i.kind != "recalled")
    return AssembledContext(
        messages=asm.messages(plan),
        tokens=asm.tokens(plan),
        budget=limit,
        over_budget=over_budget,
        long_term_items=total - long_term_omitted,
        summary_included=bool(asm.summary(plan)),
        dropped=MappingProxyType(dropped),
        recalled_items=len(items.recalled) - dropped["recalled"],
        window_messages=sum(len(t) for t in asm.turns[plan.window :]) + len(asm.current),
        shortened=plan.keep is not None and plan.keep < asm.target_length(),
    )


__all__ = [
    "EPISODES_SHARE",
    "AssembledContext",
    "ContextBudget",
    "assemble_context",
    "default_context_budget",
    "render_memory_block",
]
