"""Property tests of the bounded window reducer (SPEC 5.1) over generated conversations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.window import (
    WindowBounds,
    WindowReduction,
    merge_idempotent,
    reduce_window,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SHORT_TEXT = st.text(alphabet="abc xyz กขค\n", max_size=40)
# Mostly short or empty contents, sometimes medium, rarely long (up to 1500 characters).
CONTENT = st.integers(min_value=0, max_value=19).flatmap(
    lambda pick: (
        st.just("")
        if pick < 3
        else st.integers(min_value=200, max_value=1500).map(lambda n: "ข" * n)
        if pick == 3
        else st.integers(min_value=41, max_value=199).map(lambda n: "x" * n)
        if pick < 7
        else _SHORT_TEXT
    )
)
SHORT = st.text(alphabet='abcdef{}:"', max_size=12)


@dataclass(frozen=True)
class Case:
    """A conversation split into the window so far and an append, under some bounds."""

    existing: tuple[ChatMessage, ...]
    incoming: tuple[ChatMessage, ...]
    bounds: WindowBounds

    @property
    def conversation(self) -> tuple[ChatMessage, ...]:
        return self.existing + self.incoming


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Turns 1..n: a user message, maybe a tool-calling assistant message and its results
    (some of them deferred to the next turn), then usually an assistant reply."""
    n_turns = draw(st.integers(min_value=1, max_value=8))
    messages: list[ChatMessage] = []
    counter = 0
    deferred: list[tuple[str, str]] = []  # (tool_call_id, content) carried to the next turn

    def add(turn: int, seq: int, role: str, content: str, **payload: object) -> None:
        nonlocal counter
        counter += 1
        messages.append(
            ChatMessage.model_validate(
                {
                    "id": f"m{counter}",
                    "role": role,
                    "content": content,
                    "created_at": f"2025-07-30T10:{turn:02d}:{seq:02d}Z",
                    "turn": turn,
                    "seq": seq,
                    **payload,
                }
            )
        )

    for turn in range(1, n_turns + 1):
        seq = 0
        carried, deferred = deferred, []
        results_first = draw(st.booleans())
        if carried and results_first:
            for call_id, content in carried:
                add(turn, seq, "tool", content, tool_call_id=call_id)
                seq += 1
        add(turn, seq, "user", draw(CONTENT))
        seq += 1
        if carried and not results_first:
            for call_id, content in carried:
                add(turn, seq, "tool", content, tool_call_id=call_id)
                seq += 1
        n_calls = draw(st.integers(min_value=0, max_value=3))
        deferred_any = False
        if n_calls:
            calls = tuple(
                ToolCall(id=f"call-{turn}-{k}", name=draw(SHORT), arguments=draw(SHORT))
                for k in range(n_calls)
            )
            add(turn, seq, "assistant", draw(CONTENT), tool_calls=calls)
            seq += 1
            for tool_call in calls:
                content = draw(CONTENT)
                if turn < n_turns and draw(st.integers(0, 3)) == 0:
                    deferred.append((tool_call.id, content))
                    deferred_any = True
                else:
                    add(turn, seq, "tool", content, tool_call_id=tool_call.id)
                    seq += 1
        if not deferred_any or draw(st.booleans()):
            add(turn, seq, "assistant", draw(CONTENT))
    return messages


@st.composite
def cases(draw: st.DrawFn) -> Case:
    messages = draw(conversations())
    split = draw(st.integers(min_value=0, max_value=len(messages)))
    # The whole range, with extra weight on roomy bounds so in-bounds windows are common too,
    # and sometimes a bound exactly at the size of the newest k turns (the off-by-one edge).
    max_messages = draw(st.integers(1, 12) | st.integers(6, 12))
    max_chars = draw(st.integers(1, 2000) | st.integers(600, 2000))
    if draw(st.integers(0, 3)) == 0:
        first_kept = draw(st.integers(1, messages[-1].turn))
        suffix = [m for m in messages if m.turn >= first_kept]
        max_messages = min(max(len(suffix), 1), 12)
        max_chars = min(max(_chars(suffix), 1), 2000)
    bounds = WindowBounds(max_messages=max_messages, max_chars=max_chars)
    return Case(tuple(messages[:split]), tuple(messages[split:]), bounds)


# --- oracle helpers (independent of the reducer's block construction) -------------------


def _ids(messages: Sequence[ChatMessage]) -> list[str]:
    return [message.id for message in messages]


def _chars(messages: Sequence[ChatMessage]) -> int:
    return sum(message.char_count() for message in messages)


def _links(messages: Sequence[ChatMessage]) -> list[tuple[ChatMessage, ChatMessage]]:
    """(assistant message with the call, tool message with its result), both present."""
    caller = {call.id: m for m in messages for call in m.tool_calls}
    return [
        (caller[m.tool_call_id], m)
        for m in messages
        if m.tool_call_id is not None and m.tool_call_id in caller
    ]


def _non_evictable_tail(messages: Sequence[ChatMessage]) -> set[str]:
    """The current turn, every later-numbered turn, and (transitively) every turn from the
    oldest one a tool call links to them."""
    links = _links(messages)
    lower = max(m.turn for m in messages)
    while True:
        linked = [min(a.turn, b.turn) for a, b in links if max(a.turn, b.turn) >= lower]
        new_lower = min([lower, *linked])
        if new_lower == lower:
            return {m.id for m in messages if m.turn >= lower}
        lower = new_lower


def _over(messages: Sequence[ChatMessage], bounds: WindowBounds) -> bool:
    return len(messages) > bounds.max_messages or _chars(messages) > bounds.max_chars


def check_invariants(
    merged: Sequence[ChatMessage], reduction: WindowReduction, bounds: WindowBounds
) -> None:
    """Every invariant of SPEC 5.1 that holds for a single reduction."""
    merged_ids = _ids(merged)
    kept_ids = _ids(reduction.messages)
    evicted_ids = _ids(reduction.evicted)
    kept, evicted = set(kept_ids), set(evicted_ids)

    # Nothing lost: kept and evicted partition the merged input, each in input order.
    assert kept.isdisjoint(evicted)
    assert len(kept_ids) + len(evicted_ids) == len(merged_ids)
    assert kept | evicted == set(merged_ids)
    assert kept_ids == [i for i in merged_ids if i in kept]
    assert evicted_ids == [i for i in merged_ids if i in evicted]
    by_id = {m.id: m for m in merged}
    assert all(by_id[m.id] == m for m in (*reduction.messages, *reduction.evicted))

    # Figures.
    assert reduction.before_count == len(merged)
    assert reduction.after_count == len(kept_ids)
    assert reduction.trimmed_by_chars + reduction.trimmed_by_count == len(evicted_ids)
    assert reduction.trimmed_by_chars >= 0
    assert reduction.trimmed_by_count >= 0

    if not merged:
        assert reduction.over_bounds is False
        return

    # The current turn is never evicted.
    current = max(m.turn for m in merged)
    assert all(m.id in kept for m in merged if m.turn == current)

    # Whole turns only.
    for number in {m.turn for m in merged}:
        members = {m.id for m in merged if m.turn == number}
        assert members <= kept or members <= evicted, f"turn {number} split"

    # A tool call is never separated from its result.
    for call_message, result in _links(merged):
        assert (call_message.id in kept) == (result.id in kept), (call_message.id, result.id)

    # Within bounds, unless only the non-evictable tail is left (then flagged).
    over = _over(reduction.messages, bounds)
    assert reduction.over_bounds == over
    if over:
        assert kept == _non_evictable_tail(merged)

    # Trim figures: the oldest evictions are by chars while chars exceed max_chars, the rest
    # by count while only the count exceeds max_messages (SPEC 5.1 steps 2 then 3).
    by_chars = reduction.evicted[: reduction.trimmed_by_chars]
    by_chars_ids = set(_ids(by_chars))
    after_chars = [m for m in merged if m.id not in by_chars_ids]
    if by_chars:
        assert _chars(merged) > bounds.max_chars
        _assert_each_group_was_needed(merged, by_chars, bounds, chars_only=True)
    if reduction.trimmed_by_count:
        assert _chars(after_chars) <= bounds.max_chars
        assert len(after_chars) > bounds.max_messages

    # Evicts from the oldest: every evicted turn is older than every kept turn.
    if reduction.evicted:
        assert max(m.turn for m in reduction.evicted) < min(m.turn for m in reduction.messages)

    # Evicts no more than it must.
    _assert_each_group_was_needed(merged, reduction.evicted, bounds, chars_only=False)


def _assert_each_group_was_needed(
    merged: Sequence[ChatMessage],
    evicted: Sequence[ChatMessage],
    bounds: WindowBounds,
    *,
    chars_only: bool,
) -> None:
    """Putting back any newest group of ``evicted`` turns that no tool call ties to the
    older evicted turns would leave the window over a bound (over max_chars if
    ``chars_only``): an eviction only happens while a bound is exceeded."""
    evicted_ids = {m.id for m in evicted}
    links = _links(evicted)
    for cut in {m.turn for m in evicted}:
        if any(min(a.turn, b.turn) < cut <= max(a.turn, b.turn) for a, b in links):
            continue
        restored = [m for m in merged if m.id not in evicted_ids or m.turn >= cut]
        if chars_only:
            assert _chars(restored) > bounds.max_chars, f"turns >= {cut} fitted max_chars"
        else:
            assert _over(restored, bounds), f"evicted turns >= {cut} would have fitted"


# --- properties -------------------------------------------------------------------------


@SETTINGS
@given(conversations())
def test_generated_conversations_are_well_formed(messages: list[ChatMessage]) -> None:
    """The strategy yields unique ids, ordered turns and a call for every tool result."""
    assert len(set(_ids(messages))) == len(messages)
    assert [m.turn for m in messages] == sorted(m.turn for m in messages)
    calls = {call.id for m in messages for call in m.tool_calls}
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    assert set(results) == calls
    assert len(results) == len(set(results))


@SETTINGS
@given(cases())
def test_reduction_invariants(case: Case) -> None:
    """Bounds, whole turns, tool pairing, current turn, order and nothing lost all hold."""
    reduction = reduce_window(case.existing, case.incoming, case.bounds)
    check_invariants(case.conversation, reduction, case.bounds)
    # The whole conversation is present here, so every kept result has its call kept.
    kept = {m.id: m for m in reduction.messages}
    kept_calls = {call.id for m in reduction.messages for call in m.tool_calls}
    assert all(m.tool_call_id in kept_calls for m in kept.values() if m.role == "tool")


@SETTINGS
@given(cases())
def test_reduction_is_deterministic(case: Case) -> None:
    """The same input (even as fresh copies) always gives the same reduction."""
    first = reduce_window(case.existing, case.incoming, case.bounds)
    copies = [m.model_copy(deep=True) for m in case.conversation]
    split = len(case.existing)
    assert reduce_window(case.existing, case.incoming, case.bounds) == first
    assert reduce_window(copies[:split], copies[split:], case.bounds) == first


@SETTINGS
@given(cases(), st.data())
def test_duplicate_incoming_ids_are_not_added(case: Case, data: st.DataObject) -> None:
    """Incoming messages already in the window, or repeated in the append, change nothing."""
    expected = reduce_window(case.existing, case.incoming, case.bounds)
    echoed = data.draw(st.lists(st.sampled_from(case.existing)) if case.existing else st.just([]))
    noisy = [*echoed, *case.incoming, *case.incoming, *reversed(case.incoming)]
    assert reduce_window(case.existing, noisy, case.bounds) == expected


@SETTINGS
@given(cases())
def test_reapplying_a_present_append_changes_nothing(case: Case) -> None:
    """reduce(reduce(x, inc).messages, inc) keeps the same messages when inc is kept."""
    first = reduce_window(case.existing, case.incoming, case.bounds)
    assert reduce_window(first.messages, (), case.bounds).messages == first.messages
    kept = set(_ids(first.messages))
    if all(m.id in kept for m in case.incoming):
        second = reduce_window(first.messages, case.incoming, case.bounds)
        assert second.messages == first.messages
        assert second.evicted == ()
        assert second.over_bounds == first.over_bounds


@SETTINGS
@given(cases())
def test_reapplying_a_partly_evicted_append_keeps_the_invariants(case: Case) -> None:
    """Re-appending an append whose older turns were evicted still bounds the window."""
    first = reduce_window(case.existing, case.incoming, case.bounds)
    second = reduce_window(first.messages, case.incoming, case.bounds)
    check_invariants(merge_idempotent(first.messages, case.incoming), second, case.bounds)


@SETTINGS
@given(cases())
def test_sequential_appends_keep_the_invariants(case: Case) -> None:
    """Feeding a conversation one turn at a time keeps every invariant at every step."""
    window: tuple[ChatMessage, ...] = ()
    turns = sorted({m.turn for m in case.conversation})
    for number in turns:
        append = [m for m in case.conversation if m.turn == number]
        reduction = reduce_window(window, append, case.bounds)
        check_invariants(merge_idempotent(window, append), reduction, case.bounds)
        window = reduction.messages
