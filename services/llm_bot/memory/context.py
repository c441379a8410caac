"""Context assembly: what the model sees (SPEC 5.3), deterministic and within a token budget.

Order: the system prompt, the memory block, the window oldest first, the current user
message (the window's last message). The memory block is data, never an instruction: it
rides inside the one leading system message, after the system prompt and a fixed framing
line (:data:`~llm_bot.memory.memory_block.MEMORY_FRAMING`); there is never more than one
system message.

Budget (``input_budget = max_context_tokens - max_output_tokens - safety_margin``, counted
with ``TokenCounter.count_messages`` over the whole prompt). When over, memory is dropped in
this order until the prompt fits:

1. long-term facts and notable events, lowest score first (facts score ``salience *
   confidence``, events ``importance``; ties: older first, then id);
2. episodic summaries, oldest first;
3. the rolling summary, shortened from its start (its most recent end is kept, prefixed
   with "…"): word by word, then character by character within its last word, then removed;
4. profile attributes, alphabetically last key first.

The system prompt, the window and the current message are never dropped; when they alone
exceed the budget the result is ``over_budget`` and carries no memory block. Each stage is
searched by bisection, so a bundle of n items costs O(log n) counts, not O(n).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from llm_bot.memory.long_term import LongTermBundle
from llm_bot.memory.memory_block import (
    MEMORY_FRAMING,
    MemoryItem,
    MemoryItems,
    collect_items,
    render_items,
    render_memory_block,
)
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tokens import TokenCounter
from llm_bot.ports import PromptMessage

ELLIPSIS = "…"


@dataclass(frozen=True)
class ContextBudget:
    """Token limits of one model call; the prompt may use :attr:`input_budget` tokens."""

    max_context_tokens: int
    max_output_tokens: int
    safety_margin: int

    def __post_init__(self) -> None:
        if self.max_output_tokens < 0 or self.safety_margin < 0:
            raise ValueError("max_output_tokens and safety_margin must not be negative")
        if self.input_budget < 1:
            raise ValueError(
                "max_context_tokens must exceed max_output_tokens + safety_margin "
                f"({self.max_context_tokens} <= {self.max_output_tokens} + {self.safety_margin})"
            )

    @property
    def input_budget(self) -> int:
        return self.max_context_tokens - self.max_output_tokens - self.safety_margin


@dataclass(frozen=True)
class AssembledContext:
    """The prompt sent to the model, with what it cost and what memory was left out."""

    messages: list[PromptMessage]
    tokens: int
    """``counter.count_messages(messages)``."""
    budget: int
    over_budget: bool
    """True only when the system prompt, window and current message alone exceed the budget
    (there is then no memory block at all)."""
    long_term_items: int
    """Long-term items rendered: profile attributes, facts, episodes and events."""
    summary_included: bool
    """Whether any of the rolling summary (maybe shortened) was rendered."""
    dropped: Mapping[str, int]
    """Left out for the budget: ``facts``, ``events``, ``episodes``, ``profile`` (items)
    and ``summary_chars`` (characters cut from the start of the sanitised summary)."""


_DEFAULT_MARGIN = 256
_MODEL_LIMITS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"(chat)?gpt-4o"), 128_000, 4_096),
    (re.compile(r"gpt-4\.1"), 128_000, 4_096),
    (re.compile(r"gpt-4-turbo"), 128_000, 4_096),
    (re.compile(r"o\d"), 128_000, 4_096),
    (re.compile(r"gpt-3\.5-turbo"), 16_385, 1_024),
)
_UNKNOWN_LIMITS = (8_192, 1_024)


def default_context_budget(model: str) -> ContextBudget:
    """A sensible budget for ``model``, matched by name prefix (case-insensitive, after any
    ``provider/`` and ``ft:`` prefix); the safety margin is always 256 tokens.

    ====================================  ===========  ==========
    model family                          max_context  max_output
    ====================================  ===========  ==========
    ``gpt-4o*``, ``chatgpt-4o*``          128000       4096
    ``gpt-4.1*``                          128000       4096
    ``gpt-4-turbo*``                      128000       4096
    o-series (``o1*``, ``o3*``, ``o4*``)  128000       4096
    ``gpt-3.5-turbo*``                    16385        1024
    anything else                         8192         1024
    ====================================  ===========  ==========
    """
    name = model.strip().lower().rsplit("/", 1)[-1].removeprefix("ft:")
    context, output = next(
        ((ctx, out) for pattern, ctx, out in _MODEL_LIMITS if pattern.match(name)),
        _UNKNOWN_LIMITS,
    )
    return ContextBudget(context, output, _DEFAULT_MARGIN)


@dataclass(frozen=True)
class _Plan:
    """Memory left out: the first n of each stage's drop order."""

    scored: int = 0
    episodes: int = 0
    summary: int = 0
    profile: int = 0


class _Assembler:
    """One assembly: the fixed parts, the drop orders, and memoised counts per plan."""

    def __init__(
        self,
        *,
        system_prompt: str,
        items: MemoryItems,
        window: list[PromptMessage],
        counter: TokenCounter,
    ) -> None:
        self.head = system_prompt.strip()
        self.items = items
        self.window = window
        self.counter = counter
        self.scored = sorted(
            (*items.facts, *items.events),
            key=lambda i: (i.score, i.created_at, i.id, i.kind, i.uid),
        )
        self.episodes = sorted(items.episodes, key=lambda i: (i.created_at, i.id, i.uid))
        self.profile = list(reversed(items.profile))
        self.cuts = _summary_cuts(items.summary)
        self._counts: dict[_Plan, int] = {}

    @property
    def stage_sizes(self) -> tuple[int, int, int, int]:
        summary_steps = len(self.cuts) + 1 if self.items.summary else 0
        return len(self.scored), len(self.episodes), summary_steps, len(self.profile)

    def omitted(self, plan: _Plan) -> list[MemoryItem]:
        return [
            *self.scored[: plan.scored],
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
        content = self.head
        if block:
            memory = f"{MEMORY_FRAMING}\n{block}"
            content = f"{self.head}\n\n{memory}" if self.head else memory
        head: list[PromptMessage] = [{"role": "system", "content": content}] if content else []
        return head + self.window

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
) -> AssembledContext:
    """The prompt for the model: ``window`` ends with the current user message.

    Raises ValueError when the window holds a ``system`` message (the leading system
    message is the only one the prompt may have).
    """
    if any(message.role == "system" for message in window):
        raise ValueError("the window must not contain system messages")
    asm = _Assembler(
        system_prompt=system_prompt,
        items=collect_items(bundle, summary),
        window=[message.to_openai() for message in window],
        counter=counter,
    )
    limit = budget.input_budget
    sizes = asm.stage_sizes
    everything = _Plan(*sizes)
    if asm.tokens(everything) > limit:  # no memory at all, and still too long
        return _result(asm, everything, limit, over_budget=True)
    plan = _fit(_Plan(), sizes, lambda p: asm.tokens(p) <= limit)
    return _result(asm, plan, limit, over_budget=False)


def _fit(plan: _Plan, sizes: tuple[int, ...], fits: Callable[[_Plan], bool]) -> _Plan:
    """The plan that drops least, stage by stage: a stage is exhausted before the next one
    starts, and within a stage the smallest fitting count is found by bisection."""
    if fits(plan):
        return plan
    fields = ("scored", "episodes", "summary", "profile")
    for field, size in zip(fields, sizes, strict=True):
        if size == 0:
            continue
        if not fits(exhausted := replace(plan, **{field: size})):
            plan = exhausted
            continue
        low, high = 0, size  # fits(low) is known false, fits(high) true
        while high - low > 1:
            middle = (low + high) // 2
            if fits(replace(plan, **{field: middle})):
                high = middle
            else:
                low = middle
        return replace(plan, **{field: high})
    return plan


def _summary_cuts(summary: str) -> list[int]:
    """Where the summary may be cut, ascending (so its kept end shrinks): after each space,
    then after each character of the last word."""
    words = [index + 1 for index, char in enumerate(summary) if char == " "]
    last_word = words[-1] if words else 0
    return words + list(range(last_word + 1, len(summary)))


def _result(asm: _Assembler, plan: _Plan, limit: int, *, over_budget: bool) -> AssembledContext:
    omitted = asm.omitted(plan)
    dropped = {kind: sum(1 for i in omitted if i.kind == kind) for kind in ("facts", "events")}
    dropped |= {"episodes": plan.episodes, "profile": plan.profile}
    dropped["summary_chars"] = asm.summary_chars_dropped(plan)
    items = asm.items
    total = len(items.profile) + len(items.facts) + len(items.episodic)
    return AssembledContext(
        messages=asm.messages(plan),
        tokens=asm.tokens(plan),
        budget=limit,
        over_budget=over_budget,
        long_term_items=total - len(omitted),
        summary_included=bool(asm.summary(plan)),
        dropped=MappingProxyType(dropped),
    )


__all__ = [
    "AssembledContext",
    "ContextBudget",
    "assemble_context",
    "default_context_budget",
    "render_memory_block",
]
