"""Example-based tests of the bounded window reducer (SPEC 5.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, TypedDict

import pytest
from structlog.testing import capture_logs

from llm_bot.memory.messages import ChatMessage, Role, ToolCall
from llm_bot.memory.window import (
    WindowAppend,
    WindowBounds,
    bounded_messages,
    merge_idempotent,
    reduce_window,
)

WIDE = WindowBounds(max_messages=100, max_chars=100_000)


def msg(
    id_: str,
    role: Role,
    turn: int,
    seq: int = 0,
    content: str = "",
    *,
    tool_calls: Sequence[ToolCall] = (),
    tool_call_id: str | None = None,
) -> ChatMessage:
    return ChatMessage(
        id=id_,
        role=role,
        content=content,
        created_at=f"2025-07-30T10:{turn:02d}:{seq:02d}Z",
        turn=turn,
        seq=seq,
        tool_calls=tuple(tool_calls),
        tool_call_id=tool_call_id,
    )


def turn(n: int, user: str = "", reply: str = "") -> list[ChatMessage]:
    """A plain turn: one user message and one assistant reply."""
    return [msg(f"u{n}", "user", n, 0, user), msg(f"a{n}", "assistant", n, 1, reply)]


def ids(messages: Sequence[ChatMessage]) -> list[str]:
    return [message.id for message in messages]


def call(id_: str, name: str = "", arguments: str = "") -> ToolCall:
    return ToolCall(id=id_, name=name, arguments=arguments)


# --- idempotent merge -------------------------------------------------------------------


def test_merge_drops_incoming_ids_already_present() -> None:
    """An incoming message whose id is already in the window is not appended again."""
    existing = turn(1)
    incoming = [existing[1], msg("u2", "user", 2)]
    assert ids(merge_idempotent(existing, incoming)) == ["u1", "a1", "u2"]
    assert ids(reduce_window(existing, incoming, WIDE).messages) == ["u1", "a1", "u2"]


def test_merge_keeps_the_existing_copy_of_a_duplicate_id() -> None:
    """On an id clash the message already in the window wins over the incoming one."""
    existing = [msg("u1", "user", 1, content="original")]
    incoming = [msg("u1", "user", 1, content="redelivered")]
    assert reduce_window(existing, incoming, WIDE).messages[0].content == "original"


def test_duplicate_ids_within_one_append_are_added_once() -> None:
    """A message repeated inside one append is added only the first time."""
    u2 = msg("u2", "user", 2)
    reduction = reduce_window(turn(1), [u2, u2, u2], WIDE)
    assert ids(reduction.messages) == ["u1", "a1", "u2"]
    assert reduction.before_count == 3


def test_reapplying_an_append_already_in_the_window_changes_nothing() -> None:
    """Reducing the same append again, once it is in the window, is a no-op."""
    bounds = WindowBounds(max_messages=4, max_chars=1000)
    incoming = turn(3, "hello", "hi")
    first = reduce_window([*turn(1), *turn(2)], incoming, bounds)
    second = reduce_window(first.messages, incoming, bounds)
    assert second.messages == first.messages
    assert second.evicted == ()
    assert (second.trimmed_by_chars, second.trimmed_by_count) == (0, 0)
    assert second.over_bounds is False


def test_empty_window_and_empty_append() -> None:
    """Reducing nothing gives an empty, within-bounds window."""
    reduction = reduce_window([], [], WIDE)
    assert reduction.messages == ()
    assert reduction.evicted == ()
    assert (reduction.before_count, reduction.after_count) == (0, 0)
    assert reduction.over_bounds is False


# --- eviction by chars and by count ----------------------------------------------------


def test_within_bounds_nothing_is_evicted() -> None:
    """A window within both bounds is returned unchanged, with zero trims."""
    messages = [*turn(1, "ab", "cd"), *turn(2, "ef", "gh")]
    reduction = reduce_window(messages[:2], messages[2:], WindowBounds(4, 8))
    assert reduction.messages == tuple(messages)
    assert reduction.evicted == ()
    assert (reduction.trimmed_by_chars, reduction.trimmed_by_count) == (0, 0)
    assert reduction.over_bounds is False


def test_evicts_oldest_turns_by_chars() -> None:
    """Over max_chars, the oldest turns go until the characters fit; counted as by-chars."""
    existing = [*turn(1, "a" * 10, "b" * 10), *turn(2, "c" * 10, "d" * 10)]
    incoming = turn(3, "e" * 10, "f" * 10)
    reduction = reduce_window(existing, incoming, WindowBounds(max_messages=100, max_chars=45))
    assert ids(reduction.messages) == ["u2", "a2", "u3", "a3"]
    assert ids(reduction.evicted) == ["u1", "a1"]
    assert (reduction.trimmed_by_chars, reduction.trimmed_by_count) == (2, 0)
    assert reduction.over_bounds is False


def test_evicts_oldest_turns_by_count() -> None:
    """Over max_messages, the oldest turns go until the count fits; counted as by-count."""
    existing = [*turn(1), *turn(2), *turn(3)]
    reduction = reduce_window(existing, turn(4), WindowBounds(max_messages=4, max_chars=1000))
    assert ids(reduction.messages) == ["u3", "a3", "u4", "a4"]
    assert ids(reduction.evicted) == ["u1", "a1", "u2", "a2"]
    assert (reduction.trimmed_by_chars, reduction.trimmed_by_count) == (0, 4)


def test_chars_are_trimmed_before_count() -> None:
    """A turn evicted while chars are over counts as by-chars, later ones as by-count."""
    existing = [*turn(1, "x" * 50), *turn(2), *turn(3)]
    reduction = reduce_window(existing, turn(4), WindowBounds(max_messages=4, max_chars=10))
    assert ids(reduction.messages) == ["u3", "a3", "u4", "a4"]
    assert (reduction.trimmed_by_chars, reduction.trimmed_by_count) == (2, 2)
    assert reduction.before_count == 8
    assert reduction.after_count == 4


def test_a_turn_over_both_bounds_counts_as_by_chars() -> None:
    """A turn evicted while both bounds are exceeded is reported once, as by-chars."""
    existing = turn(1, "x" * 50)
    reduction = reduce_window(existing, turn(2), WindowBounds(max_messages=2, max_chars=10))
    assert (reduction.trimmed_by_chars, reduction.trimmed_by_count) == (2, 0)
    assert len(reduction.evicted) == 2


def test_tool_payloads_count_towards_chars() -> None:
    """A tool call's name and arguments cost characters like content does."""
    calling = msg("a1", "assistant", 1, 1, tool_calls=[call("c1", "lookup", '{"sku":"123"}')])
    assert calling.char_count() == len("lookup") + len('{"sku":"123"}')
    existing = [msg("u1", "user", 1), calling, msg("t1", "tool", 1, 2, tool_call_id="c1")]
    reduction = reduce_window(existing, turn(2), WindowBounds(max_messages=100, max_chars=10))
    assert ids(reduction.evicted) == ["u1", "a1", "t1"]
    assert reduction.trimmed_by_chars == 3


# --- whole turns -----------------------------------------------------------------------


def test_a_turn_leaves_whole() -> None:
    """A turn's user and assistant messages are evicted together, even if one would do."""
    existing = [*turn(1), *turn(2)]
    reduction = reduce_window(existing, turn(3), WindowBounds(max_messages=5, max_chars=1000))
    assert ids(reduction.messages) == ["u2", "a2", "u3", "a3"]
    assert ids(reduction.evicted) == ["u1", "a1"]


def test_a_turn_with_several_messages_leaves_whole() -> None:
    """A turn with tool traces is evicted as one unit, every message of it at once."""
    turn1 = [
        msg("u1", "user", 1, 0),
        msg("a1", "assistant", 1, 1, tool_calls=[call("c1"), call("c2")]),
        msg("t1", "tool", 1, 2, tool_call_id="c1"),
        msg("t2", "tool", 1, 3, tool_call_id="c2"),
        msg("r1", "assistant", 1, 4, "done"),
    ]
    reduction = reduce_window(turn1, turn(2), WindowBounds(max_messages=6, max_chars=1000))
    assert ids(reduction.messages) == ["u2", "a2"]
    assert ids(reduction.evicted) == ["u1", "a1", "t1", "t2", "r1"]
    assert reduction.trimmed_by_count == 5
    assert reduction.evicted_turns == (1,)


# --- the current turn ------------------------------------------------------------------


def test_current_turn_is_the_highest_turn_number() -> None:
    """The current turn is the highest turn present, wherever it sits in the input."""
    reduction = reduce_window(turn(5), turn(2), WindowBounds(max_messages=1, max_chars=1000))
    assert ids(reduction.messages) == ["u5", "a5"]
    assert ids(reduction.evicted) == ["u2", "a2"]
    assert reduction.over_bounds is True


def test_current_turn_alone_over_chars_is_kept_and_flagged() -> None:
    """A current turn larger than max_chars is kept whole; older turns go; over_bounds."""
    existing = [*turn(1, "a"), *turn(2, "b")]
    big = turn(3, "x" * 500, "y" * 500)
    reduction = reduce_window(existing, big, WindowBounds(max_messages=100, max_chars=100))
    assert reduction.messages == tuple(big)
    assert ids(reduction.evicted) == ["u1", "a1", "u2", "a2"]
    assert reduction.trimmed_by_chars == 4
    assert reduction.over_bounds is True


def test_current_turn_alone_over_count_is_kept_and_flagged() -> None:
    """A current turn with more messages than max_messages is kept whole; over_bounds."""
    current = [
        msg("u2", "user", 2, 0),
        msg("a2", "assistant", 2, 1, tool_calls=[call("c1")]),
        msg("t2", "tool", 2, 2, tool_call_id="c1"),
        msg("r2", "assistant", 2, 3),
    ]
    reduction = reduce_window(turn(1), current, WindowBounds(max_messages=2, max_chars=1000))
    assert reduction.messages == tuple(current)
    assert ids(reduction.evicted) == ["u1", "a1"]
    assert reduction.trimmed_by_count == 2
    assert reduction.over_bounds is True


def test_single_oversize_message_is_trimmed_never_an_error() -> None:
    """One message bigger than both bounds is kept and flagged, not rejected."""
    reduction = reduce_window([], [msg("u1", "user", 1, 0, "z" * 10_000)], WindowBounds(1, 1))
    assert ids(reduction.messages) == ["u1"]
    assert reduction.evicted == ()
    assert reduction.over_bounds is True


# --- tool call and result are never separated -----------------------------------------


def _tool_turns() -> list[ChatMessage]:
    """Turn 1 calls a tool whose result arrives in turn 2; turn 3 is plain."""
    return [
        msg("u1", "user", 1, 0),
        msg("a1", "assistant", 1, 1, tool_calls=[call("c1", "stock")]),
        msg("u2", "user", 2, 0),
        msg("t1", "tool", 2, 1, tool_call_id="c1"),
        msg("a2", "assistant", 2, 2),
        *turn(3),
    ]


def test_tool_call_and_result_in_one_turn_leave_together() -> None:
    """An assistant tool call and its result in the same turn are evicted together."""
    turn1 = [
        msg("u1", "user", 1, 0),
        msg("a1", "assistant", 1, 1, tool_calls=[call("c1")]),
        msg("t1", "tool", 1, 2, tool_call_id="c1"),
    ]
    reduction = reduce_window(turn1, turn(2), WindowBounds(max_messages=4, max_chars=1000))
    assert ids(reduction.evicted) == ["u1", "a1", "t1"]


def test_tool_result_in_a_later_turn_ties_the_two_turns() -> None:
    """A call whose result is in the next turn makes the two turns leave together."""
    messages = _tool_turns()
    # Evicting turn 1 alone (2 messages) would fit max_messages=5, but would orphan t1.
    reduction = reduce_window(messages[:5], messages[5:], WindowBounds(5, 1000))
    assert ids(reduction.messages) == ["u3", "a3"]
    assert ids(reduction.evicted) == ["u1", "a1", "u2", "t1", "a2"]
    assert reduction.trimmed_by_count == 5
    assert reduction.evicted_turns == (1, 2)
    assert reduction.over_bounds is False


def test_linked_turns_are_kept_together_when_within_bounds() -> None:
    """When the linked turns fit, neither the call nor its later result is evicted."""
    messages = _tool_turns()
    reduction = reduce_window(messages[:5], messages[5:], WindowBounds(7, 1000))
    assert reduction.messages == tuple(messages)
    assert reduction.evicted == ()


def test_call_linked_to_the_current_turn_is_never_evicted() -> None:
    """A call whose result is in the current turn stays, even over bounds."""
    messages = [
        *turn(1),
        msg("u2", "user", 2, 0),
        msg("a2", "assistant", 2, 1, tool_calls=[call("c1")]),
        msg("t1", "tool", 3, 0, tool_call_id="c1"),
        msg("a3", "assistant", 3, 1),
    ]
    reduction = reduce_window(messages[:4], messages[4:], WindowBounds(1, 1000))
    assert ids(reduction.messages) == ["u2", "a2", "t1", "a3"]
    assert ids(reduction.evicted) == ["u1", "a1"]
    assert reduction.over_bounds is True


def test_tool_result_separated_from_its_call_by_a_turn_still_ties_them() -> None:
    """A result two turns after its call keeps the whole span, turns between included."""
    messages = [
        msg("u1", "user", 1, 0),
        msg("a1", "assistant", 1, 1, tool_calls=[call("c1")]),
        *turn(2),
        msg("u3", "user", 3, 0),
        msg("t1", "tool", 3, 1, tool_call_id="c1"),
        *turn(4),
    ]
    reduction = reduce_window(messages, [], WindowBounds(3, 1000))
    assert ids(reduction.messages) == ["u4", "a4"]
    assert reduction.evicted_turns == (1, 2, 3)


# --- order and nothing lost -------------------------------------------------------------


def test_order_is_preserved() -> None:
    """Kept messages keep the order of the merged input."""
    messages = _tool_turns()
    reduction = reduce_window(messages[:3], messages[3:], WIDE)
    assert reduction.messages == tuple(messages)
    small = reduce_window(messages[:3], messages[3:], WindowBounds(2, 1000))
    assert ids(small.messages) == ["u3", "a3"]


def test_evicted_plus_kept_is_the_merged_input() -> None:
    """Evicted messages are returned, not dropped: evicted + kept == merged input."""
    existing = [*turn(1, "a" * 30), *turn(2, "b")]
    incoming = [existing[0], *turn(3, "c")]
    reduction = reduce_window(existing, incoming, WindowBounds(max_messages=3, max_chars=20))
    merged = merge_idempotent(existing, incoming)
    assert [*reduction.evicted, *reduction.messages] == merged
    assert reduction.before_count == len(merged)
    assert reduction.trimmed_by_chars + reduction.trimmed_by_count == len(reduction.evicted)


def test_reduction_is_deterministic() -> None:
    """The same input always gives the same reduction."""
    messages = _tool_turns()
    bounds = WindowBounds(3, 10)
    assert reduce_window(messages[:4], messages[4:], bounds) == reduce_window(
        messages[:4], messages[4:], bounds
    )


def test_stale_append_of_evicted_turns_is_evicted_again() -> None:
    """Re-appending turns the window already evicted neither breaks bounds nor scrambles it."""
    incoming = [*turn(1), *turn(2), *turn(3)]
    bounds = WindowBounds(max_messages=2, max_chars=1000)
    first = reduce_window([], incoming, bounds)
    assert ids(first.messages) == ["u3", "a3"]
    second = reduce_window(first.messages, incoming, bounds)
    assert second.messages == first.messages
    assert second.over_bounds is False
    assert ids(second.evicted) == ["u1", "a1", "u2", "a2"]


# --- bounds -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_messages", "max_chars"), [(0, 1), (1, 0), (-1, 100), (8, -8000), (0, 0)]
)
def test_bounds_reject_non_positive_values(max_messages: int, max_chars: int) -> None:
    """WindowBounds refuses a zero or negative message count or character budget."""
    with pytest.raises(ValueError, match="positive"):
        WindowBounds(max_messages=max_messages, max_chars=max_chars)


def test_bounds_accept_the_smallest_positive_values() -> None:
    """WindowBounds(1, 1) is valid."""
    assert WindowBounds(max_messages=1, max_chars=1) == WindowBounds(1, 1)


# --- the LangGraph reducer --------------------------------------------------------------


def test_bounded_messages_reduces_a_window_append() -> None:
    """A WindowAppend update is merged and bounded; the reducer returns a list."""
    update = WindowAppend(messages=tuple(turn(3)), bounds=WindowBounds(4, 1000))
    result = bounded_messages([*turn(1), *turn(2)], update)
    assert isinstance(result, list)
    assert ids(result) == ["u2", "a2", "u3", "a3"]


def test_bounded_messages_starts_from_no_state() -> None:
    """With no existing state, a WindowAppend reduces its own messages."""
    update = WindowAppend(messages=(*turn(1), *turn(2)), bounds=WindowBounds(2, 1000))
    assert ids(bounded_messages(None, update)) == ["u2", "a2"]


def test_bounded_messages_merges_a_plain_list_without_bounds() -> None:
    """A plain list is merged idempotently and not bounded (used to seed state)."""
    seed = [*turn(1), *turn(2), *turn(3)]
    assert bounded_messages(None, seed) == seed
    assert bounded_messages(seed[:2], seed) == seed


def test_bounded_messages_logs_its_figures_at_debug() -> None:
    """Each bounded update logs memory.window.reduced at debug with its figures."""
    existing = [*turn(1, "x" * 50), *turn(2), *turn(3)]
    update = WindowAppend(messages=tuple(turn(4)), bounds=WindowBounds(4, 10))
    with capture_logs() as logs:
        bounded_messages(existing, update)
    reduced = [entry for entry in logs if entry["event"] == "memory.window.reduced"]
    assert len(reduced) == 1
    entry = reduced[0]
    assert entry["log_level"] == "debug"
    assert entry["before_count"] == 8
    assert entry["after_count"] == 4
    assert entry["trimmed_by_chars"] == 2
    assert entry["trimmed_by_count"] == 2


def test_bounded_messages_logs_even_when_nothing_is_trimmed() -> None:
    """A bounded update within bounds still logs, with zero trims."""
    with capture_logs() as logs:
        bounded_messages(turn(1), WindowAppend(tuple(turn(2)), WIDE))
    assert [
        (e["before_count"], e["after_count"], e["trimmed_by_chars"], e["trimmed_by_count"])
        for e in logs
        if e["event"] == "memory.window.reduced"
    ] == [(4, 4, 0, 0)]


def test_bounded_messages_drives_a_langgraph_state_channel() -> None:
    """As an Annotated reducer of a LangGraph state, node updates are bounded."""
    from langgraph.graph import END, START, StateGraph  # noqa: PLC0415 - heavy import

    class State(TypedDict):
        messages: Annotated[list[ChatMessage], bounded_messages]

    bounds = WindowBounds(max_messages=2, max_chars=1000)

    def respond(state: State) -> dict[str, WindowAppend]:
        reply = msg("a2", "assistant", 2, 1, "hi")
        return {"messages": WindowAppend(messages=(reply,), bounds=bounds)}

    graph = StateGraph(State)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    out = graph.compile().invoke({"messages": [*turn(1), msg("u2", "user", 2, 0)]})
    assert ids(out["messages"]) == ["u2", "a2"]
