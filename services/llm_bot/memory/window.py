"""The bounded reducer of the recent-message window (SPEC 5.1).

``reduce_window`` is pure and deterministic:

1. ``merged = existing + incoming``, dropping incoming messages whose ``id`` is present;
2. while the characters of ``merged`` exceed ``max_chars``, evict from the oldest;
3. while the message count exceeds ``max_messages``, evict from the oldest;
4. eviction takes whole turns, keeps an assistant tool call with its tool results (turns
   linked by a tool call are evicted together), and never evicts the current turn (the
   highest turn number present). When the current turn alone exceeds a bound it is kept
   and the reduction is flagged ``over_bounds``.

Evicted messages are returned, not dropped: the caller appends them to the raw trace and
hands them to compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from llm_bot.memory.messages import ChatMessage

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class WindowBounds:
    """Upper bounds of the window: message count and characters."""

    max_messages: int
    max_chars: int

    def __post_init__(self) -> None:
        if self.max_messages < 1 or self.max_chars < 1:
            raise ValueError("window bounds must be positive")


@dataclass(frozen=True)
class WindowReduction:
    """The result of one reduction, with the figures the debug log and metrics report."""

    messages: tuple[ChatMessage, ...]
    evicted: tuple[ChatMessage, ...]
    before_count: int
    trimmed_by_chars: int
    trimmed_by_count: int
    over_bounds: bool

    @property
    def after_count(self) -> int:
        return len(self.messages)

    @property
    def evicted_turns(self) -> tuple[int, ...]:
        return tuple(sorted({message.turn for message in self.evicted}))


@dataclass(frozen=True)
class WindowAppend:
    """A graph-state update: append ``messages`` to the window under ``bounds``."""

    messages: tuple[ChatMessage, ...]
    bounds: WindowBounds


def merge_idempotent(
    existing: Sequence[ChatMessage], incoming: Sequence[ChatMessage]
) -> list[ChatMessage]:
    """``existing + incoming`` without the incoming messages whose id is already present."""
    seen = {message.id for message in existing}
    merged = list(existing)
    for message in incoming:
        if message.id not in seen:
            seen.add(message.id)
            merged.append(message)
    return merged


def _eviction_blocks(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """Group messages into evictable blocks: whole turns, joined when a tool call spans them."""
    blocks: list[list[ChatMessage]] = []
    block_turns: list[set[int]] = []
    turn_block: dict[int, int] = {}  # each turn is in exactly one block
    call_block: dict[str, int] = {}
    for message in messages:
        index = turn_block.get(message.turn)
        if index is None:
            index = len(blocks)
            blocks.append([])
            block_turns.append({message.turn})
            turn_block[message.turn] = index
        if message.tool_call_id is not None:
            owner = call_block.get(message.tool_call_id)
            if owner is not None and owner != index:
                index = _join_blocks(blocks, block_turns, call_block, owner, index)
                for turn in block_turns[index]:
                    turn_block[turn] = index
        blocks[index].append(message)
        for call in message.tool_calls:
            call_block[call.id] = index
    return [block for block in blocks if block]


def _join_blocks(
    blocks: list[list[ChatMessage]],
    block_turns: list[set[int]],
    call_block: dict[str, int],
    first: int,
    last: int,
) -> int:
    """Fold blocks ``first..last`` into ``first`` (a tool call links them); returns ``first``."""
    low, high = min(first, last), max(first, last)
    for index in range(low + 1, high + 1):
        blocks[low].extend(blocks[index])
        block_turns[low] |= block_turns[index]
        blocks[index] = []
        block_turns[index] = set()
    for call_id, owner in call_block.items():
        if low <= owner <= high:
            call_block[call_id] = low
    return low


def _chars(messages: Sequence[ChatMessage]) -> int:
    return sum(message.char_count() for message in messages)


def reduce_window(
    existing: Sequence[ChatMessage],
    incoming: Sequence[ChatMessage],
    bounds: WindowBounds,
) -> WindowReduction:
    """Merge ``incoming`` into ``existing`` and evict whole old turns until within bounds."""
    merged = merge_idempotent(existing, incoming)
    if not merged:
        return WindowReduction((), (), 0, 0, 0, over_bounds=False)
    kept_count = len(merged)
    kept_chars = _chars(merged)
    if kept_chars <= bounds.max_chars and kept_count <= bounds.max_messages:
        # Within bounds: no block leaves, so the blocks below would give back ``merged``.
        return WindowReduction(tuple(merged), (), kept_count, 0, 0, over_bounds=False)
    current_turn = max(message.turn for message in merged)
    # Oldest first by turn, not by position: a stale append (turns the window already
    # evicted, re-sent after newer ones) must be evicted first, not kept after the current
    # turn. In-order input is already in this order (a stable sort leaves it unchanged).
    blocks = sorted(_eviction_blocks(merged), key=lambda block: max(m.turn for m in block))
    by_chars = by_count = 0
    while blocks and not any(m.turn == current_turn for m in blocks[0]):
        if kept_chars > bounds.max_chars:
            by_chars += len(blocks[0])
        elif kept_count > bounds.max_messages:
            by_count += len(blocks[0])
        else:
            break
        block = blocks.pop(0)
        kept_chars -= _chars(block)
        kept_count -= len(block)
    kept = tuple(message for block in blocks for message in block)
    # Blocks may reorder messages when a tool call links non-adjacent turns; keep input order.
    kept_ids = {message.id for message in kept}
    ordered = tuple(message for message in merged if message.id in kept_ids)
    over = kept_chars > bounds.max_chars or kept_count > bounds.max_messages
    return WindowReduction(
        messages=ordered,
        evicted=tuple(message for message in merged if message.id not in kept_ids),
        before_count=len(merged),
        trimmed_by_chars=by_chars,
        trimmed_by_count=by_count,
        over_bounds=over,
    )


def bounded_messages(
    existing: list[ChatMessage] | None, update: WindowAppend | list[ChatMessage]
) -> list[ChatMessage]:
    """LangGraph reducer for ``GraphState.messages``.

    A ``WindowAppend`` is reduced under its bounds; a plain list is merged idempotently
    (used to seed state in tests). Every bounded update logs its figures at debug.
    """
    if isinstance(update, list):
        return merge_idempotent(existing or [], update)
    reduction = reduce_window(existing or [], update.messages, update.bounds)
    log.debug(
        "memory.window.reduced",
        before_count=reduction.before_count,
        after_count=reduction.after_count,
        trimmed_by_chars=reduction.trimmed_by_chars,
        trimmed_by_count=reduction.trimmed_by_count,
        over_bounds=reduction.over_bounds,
    )
    return list(reduction.messages)
