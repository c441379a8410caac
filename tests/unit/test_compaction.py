"""Compaction (SPEC 5.4): which turns to fold, the summarizer's contract, applying it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_bot.memory.compaction import (
    KEEP_RAW_TURNS,
    MAX_TURNS_PER_BATCH,
    SUMMARY_MAX_TOKENS,
    apply_compaction,
    parse_summarizer_output,
    render_turns,
    summarizer_json_schema,
    summarizer_messages,
    turns_to_compact,
)
from llm_bot.memory.fact_updates import FactDecision
from llm_bot.memory.long_term import SemanticFact
from llm_bot.memory.messages import ChatMessage, ToolCall
from llm_bot.memory.tokens import TiktokenCounter
from llm_bot.memory.working import WorkingMemory

COUNTER = TiktokenCounter()

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD_OUTPUT: dict[str, Any] = {
    "rolling_summary": "The user asked about a blue kettle and its price.",
    "episode_summary": "The user compared kettle prices.",
    "episode_tags": ["price", "kettle"],
    "salience": 0.6,
    "facts": [
        {"fact": "The user prefers blue kettles.", "tags": ["preference"], "confidence": 0.8}
    ],
    "profile": [{"key": "preferred_language", "value": "en"}],
}


def msg(turn: int, seq: int, role: str, content: str = "", **extra: Any) -> ChatMessage:
    """A chat message with an id unique to its turn and position."""
    return ChatMessage.model_validate(
        {
            "id": f"t{turn}-{seq}",
            "role": role,
            "content": content,
            "created_at": f"2025-07-30T10:{turn % 60:02d}:{seq:02d}Z",
            "turn": turn,
            "seq": seq,
            **extra,
        }
    )


def plain_turn(turn: int) -> list[ChatMessage]:
    """A user message and the assistant's reply."""
    return [msg(turn, 0, "user", f"question {turn}"), msg(turn, 1, "assistant", f"answer {turn}")]


def tool_turn(turn: int) -> list[ChatMessage]:
    """A user message, an assistant tool call, its result and the reply, all in one turn."""
    call = ToolCall(id=f"call-{turn}", name="lookup", arguments='{"sku": "K1"}')
    return [
        msg(turn, 0, "user", f"question {turn}"),
        msg(turn, 1, "assistant", tool_calls=(call,)),
        msg(turn, 2, "tool", "in stock", tool_call_id=call.id),
        msg(turn, 3, "assistant", f"answer {turn}"),
    ]


def memory_of(
    turns: list[int], *, pending: tuple[int, ...] = (), summary: str = ""
) -> WorkingMemory:
    """A working memory whose window holds plain turns ``turns``."""
    messages = tuple(m for turn in turns for m in plain_turn(turn))
    return WorkingMemory(messages=messages, pending_compaction=pending, summary=summary)


def orphans(messages: tuple[ChatMessage, ...]) -> list[str]:
    """Ids of tool results whose call is not earlier in ``messages``, and of calls left
    without their results: the pairs a model request must never see split."""
    call_ids = {c.id for m in messages for c in m.tool_calls}
    result_ids = {m.tool_call_id for m in messages if m.tool_call_id is not None}
    lonely = [
        m.id for m in messages if m.tool_call_id is not None and m.tool_call_id not in call_ids
    ]
    lonely += [c.id for m in messages for c in m.tool_calls if c.id not in result_ids]
    return lonely


# --- turns_to_compact -------------------------------------------------------------------


def test_evicted_turns_are_chosen_oldest_first_from_compacted_through() -> None:
    """Turns missing from the window are chosen in order, starting after compacted_through."""
    memory = memory_of([5, 6, 7, 8])
    chosen = turns_to_compact(memory, last_turn=8, compacted_through=1, token_pressure=False)
    assert chosen == (2, 3, 4)


def test_evicted_turns_stop_at_the_first_turn_still_in_the_window() -> None:
    """Only the contiguous run of evicted turns is chosen; a later gap waits its turn."""
    memory = memory_of([3, 5, 6])
    chosen = turns_to_compact(memory, last_turn=6, compacted_through=0, token_pressure=False)
    assert chosen == (1, 2)


def test_the_current_turn_is_never_chosen_without_finalize() -> None:
    """Even when the window is empty (it expired), the last turn stays for later."""
    chosen = turns_to_compact(
        WorkingMemory(), last_turn=5, compacted_through=0, token_pressure=True
    )
    assert chosen == (1, 2, 3, 4)


def test_token_pressure_folds_window_turns_older_than_the_last_four() -> None:
    """Under pressure window turns before the last KEEP_RAW_TURNS go; the last four stay."""
    memory = memory_of(list(range(1, 11)))
    chosen = turns_to_compact(memory, last_turn=10, compacted_through=0, token_pressure=True)
    assert KEEP_RAW_TURNS == 4
    assert chosen == (1, 2, 3, 4, 5, 6)
    assert not set(chosen) & {7, 8, 9, 10}


def test_token_pressure_with_only_four_turns_chooses_nothing() -> None:
    """When the window holds just the last four turns, pressure has nothing to fold."""
    memory = memory_of([7, 8, 9, 10])
    chosen = turns_to_compact(memory, last_turn=10, compacted_through=6, token_pressure=True)
    assert chosen == ()


def test_without_pressure_window_turns_are_not_chosen() -> None:
    """With every turn still in the window and no pressure, nothing is due."""
    memory = memory_of(list(range(1, 11)))
    assert turns_to_compact(memory, last_turn=10, compacted_through=0, token_pressure=False) == ()


def test_finalize_chooses_every_remaining_turn_including_the_current_one() -> None:
    """Finalize folds everything after compacted_through, the current turn included."""
    memory = memory_of([4, 5, 6])
    chosen = turns_to_compact(
        memory, last_turn=6, compacted_through=2, token_pressure=False, finalize=True
    )
    assert chosen == (3, 4, 5, 6)


@pytest.mark.parametrize("finalize", [False, True])
def test_nothing_to_do_is_empty(finalize: bool) -> None:
    """With everything already compacted, the choice is empty."""
    memory = memory_of([])
    chosen = turns_to_compact(
        memory, last_turn=6, compacted_through=6, token_pressure=True, finalize=finalize
    )
    assert chosen == ()


def test_pressure_does_not_split_a_tool_call_from_a_result_in_a_later_turn() -> None:
    """A call in turn 6 answered in turn 7 (one of the last four) keeps turn 6 raw."""
    call = ToolCall(id="call-late", name="lookup", arguments="{}")
    messages = (
        *[m for turn in range(1, 6) for m in plain_turn(turn)],
        msg(6, 0, "user", "check my order"),
        msg(6, 1, "assistant", tool_calls=(call,)),
        msg(7, 0, "user", "any news?"),
        msg(7, 1, "tool", "shipped", tool_call_id=call.id),
        msg(7, 2, "assistant", "it shipped"),
        *[m for turn in range(8, 11) for m in plain_turn(turn)],
    )
    memory = WorkingMemory(messages=messages)
    chosen = turns_to_compact(memory, last_turn=10, compacted_through=0, token_pressure=True)
    assert chosen == (1, 2, 3, 4, 5)
    after = apply_compaction(memory, turns=chosen, rolling_summary="s")
    assert orphans(after.messages) == []


# --- apply_compaction -------------------------------------------------------------------


def test_apply_removes_exactly_the_folded_turns_and_sets_the_summary() -> None:
    """Folded turns leave the window and the pending list; the rest stays, in order."""
    memory = WorkingMemory(
        messages=(*plain_turn(3), *tool_turn(4), *plain_turn(5), *plain_turn(6)),
        pending_compaction=(1, 2, 7),
        summary="old summary",
        session={"lang": "th"},
    )
    after = apply_compaction(memory, turns=(1, 2, 3, 4), rolling_summary="  new summary \n")
    assert after.messages == (*plain_turn(5), *plain_turn(6))
    assert after.pending_compaction == (7,)
    assert after.summary == "new summary"
    assert after.session == {"lang": "th"}
    assert memory.summary == "old summary"  # the input is not mutated


def test_apply_takes_a_tool_turn_whole() -> None:
    """User message, tool call, tool result and reply of a folded turn leave together."""
    memory = WorkingMemory(messages=(*tool_turn(1), *tool_turn(2)))
    after = apply_compaction(memory, turns=(1,), rolling_summary="s")
    assert after.messages == tuple(tool_turn(2))
    assert orphans(after.messages) == []


def test_apply_is_idempotent() -> None:
    """Applying the same compaction twice gives the same memory as applying it once."""
    memory = WorkingMemory(
        messages=(*tool_turn(1), *plain_turn(2), *plain_turn(3)), pending_compaction=(1,)
    )
    once = apply_compaction(memory, turns=(1, 2), rolling_summary="summary")
    twice = apply_compaction(once, turns=(1, 2), rolling_summary="summary")
    assert twice == once


def test_apply_bounds_the_summary() -> None:
    """An over-long rolling summary keeps its newest end, as much of it as fits in
    SUMMARY_MAX_TOKENS with the cut's marker."""
    said = " ".join(f"word{n}" for n in range(2000))
    after = apply_compaction(WorkingMemory(), turns=(), rolling_summary=said)
    kept = COUNTER.count(after.summary)
    assert SUMMARY_MAX_TOKENS - 3 <= kept <= SUMMARY_MAX_TOKENS
    assert after.summary.startswith("…")
    assert said.endswith(after.summary[1:])


def test_the_summary_bound_is_the_same_in_every_script() -> None:
    """A Thai summary and an English one are bounded by the same tokens (a bound in
    characters gave Thai, ~1 token a character, four times the English share)."""
    english = apply_compaction(
        WorkingMemory(), turns=(), rolling_summary="The customer asked about the kettle. " * 200
    ).summary
    thai = apply_compaction(
        WorkingMemory(), turns=(), rolling_summary="ลูกค้าถามเรื่องกาต้มน้ำสีฟ้า " * 200
    ).summary
    for summary in (english, thai):
        assert SUMMARY_MAX_TOKENS - 8 <= COUNTER.count(summary) <= SUMMARY_MAX_TOKENS
    assert len(thai) < len(english) / 2


def test_a_summary_within_the_bound_is_kept_whole() -> None:
    said = "ลูกค้าชื่อมะลิ ชอบรับของวันเสาร์"
    assert apply_compaction(WorkingMemory(), turns=(), rolling_summary=said).summary == said


# --- summarizer contract ----------------------------------------------------------------


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON-schema node of type object, recursively (including ``$defs``)."""
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_summarizer_schema_is_strict() -> None:
    """Every object forbids extra properties and requires all of its properties."""
    schema = summarizer_json_schema()
    objects = list(_objects(schema))
    assert len(objects) >= 3  # the output, a fact, a profile attribute
    for node in objects:
        assert node["additionalProperties"] is False
        assert set(node["required"]) == set(node["properties"])
    assert set(schema["properties"]) == set(GOOD_OUTPUT)


def test_summarizer_schema_has_no_keywords_strict_mode_rejects() -> None:
    """Titles, defaults and numeric/length bounds are stripped from the schema."""
    text = json.dumps(summarizer_json_schema())
    for keyword in ('"title"', '"default"', '"minLength"', '"maxLength"', '"minimum"'):
        assert keyword not in text
    assert '"maximum"' not in text
    assert '"maxItems"' not in text


def test_summarizer_schema_is_a_fresh_copy_each_time() -> None:
    """The schema is built once; a caller changing its copy changes no later request."""
    first = summarizer_json_schema()
    first["properties"].clear()
    assert summarizer_json_schema()["properties"]
    assert summarizer_json_schema() is not summarizer_json_schema()


def test_parse_accepts_valid_output() -> None:
    """Valid JSON matching the schema parses into the output model."""
    output = parse_summarizer_output(json.dumps(GOOD_OUTPUT, ensure_ascii=False))
    assert output is not None
    assert output.salience == 0.6
    assert output.facts[0].fact == "The user prefers blue kettles."
    assert output.profile[0].key == "preferred_language"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        "42",
        '{"rolling_summary": "x"}',
        json.dumps({**GOOD_OUTPUT, "extra": 1}),
        json.dumps({**GOOD_OUTPUT, "salience": 1.5}),
        json.dumps({**GOOD_OUTPUT, "salience": -0.1}),
        json.dumps({**GOOD_OUTPUT, "rolling_summary": ""}),
        json.dumps({**GOOD_OUTPUT, "facts": [{"fact": "x", "tags": [], "confidence": 2}]}),
        json.dumps({**GOOD_OUTPUT, "facts": [{"fact": "x", "tags": [], "confidence": 1, "y": 0}]}),
        json.dumps({**GOOD_OUTPUT, "profile": [{"key": "k", "value": "v", "source": "s"}]}),
    ],
)
def test_parse_rejects_junk_extra_fields_and_out_of_range(text: str) -> None:
    """Junk, missing or extra fields and out-of-range numbers give None."""
    assert parse_summarizer_output(text) is None


def test_render_turns_shows_tool_calls_and_results() -> None:
    """Each message is one line naming its turn; calls show name(arguments)."""
    text = render_turns(tool_turn(3))
    assert text.splitlines() == [
        "turn 3 user: question 3",
        'turn 3 assistant called tools: lookup({"sku": "K1"})',
        "turn 3 tool result: in stock",
        "turn 3 assistant: answer 3",
    ]


def test_summarizer_messages_carry_the_turns_and_stored_facts_as_data() -> None:
    """The system prompt instructs; the user message is JSON with the summary, the stored
    facts (id and text only) and the turns."""
    stored = SemanticFact(
        id="fact_1",
        fact="The user is vegetarian.",
        confidence=0.9,
        salience=0.5,
        created_at="2025-01-01T00:00:00+00:00",
        updated_at="2025-01-01T00:00:00+00:00",
    )
    prompt = summarizer_messages("earlier: สวัสดี", plain_turn(1), [stored])
    assert [m["role"] for m in prompt] == ["system", "user"]
    data = json.loads(str(prompt[1]["content"]))
    assert data == {
        "rolling_summary": "earlier: สวัสดี",
        "stored_facts": [{"id": "fact_1", "fact": "The user is vegetarian."}],
        "turns": render_turns(plain_turn(1)),
    }
    assert (
        json.loads(str(summarizer_messages("", plain_turn(1))[1]["content"]))["stored_facts"] == []
    )


def test_a_summarizer_that_omits_action_and_target_adds_its_facts() -> None:
    """Output of a summarizer that predates (or ignores) ``action``/``target`` still parses:
    each fact is an ``add`` for the deterministic dedupe to check."""
    output = parse_summarizer_output(
        json.dumps({**GOOD_OUTPUT, "facts": [{"fact": "x", "tags": ["A"], "confidence": 0.5}]})
    )
    assert output is not None
    assert output.facts[0].decision() == FactDecision("x", ("a",), 0.5, "add", None)


def test_a_summarizer_update_names_its_target() -> None:
    """``update`` with a target id becomes a decision naming it; an empty target is none."""
    fact = {"fact": "x", "tags": [], "confidence": 1.0, "action": "update", "target": "fact_1"}
    output = parse_summarizer_output(
        json.dumps({**GOOD_OUTPUT, "facts": [fact, {**fact, "target": ""}]})
    )
    assert output is not None
    assert [f.decision().target for f in output.facts] == ["fact_1", None]
    bad = {**fact, "action": "replace"}
    assert parse_summarizer_output(json.dumps({**GOOD_OUTPUT, "facts": [bad]})) is None


# --- properties -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A working memory of turns 1..last_turn, some evicted, and the compaction inputs."""

    memory: WorkingMemory
    last_turn: int
    compacted_through: int
    token_pressure: bool


@st.composite
def cases(draw: st.DrawFn, *, cross_turn_tools: bool = False) -> Case:
    """Turns after compacted_through, each evicted or in the window; the current turn is
    in the window unless the whole working memory expired. With ``cross_turn_tools`` a
    tool call may be answered in the next turn (the window evicts such turns together)."""
    last_turn = draw(st.integers(min_value=1, max_value=14))
    compacted_through = draw(st.integers(0, min(2, last_turn)) | st.integers(0, last_turn))
    # The window evicts from the oldest: mostly a run of evicted turns, sometimes scattered.
    evicted_through = draw(st.integers(compacted_through, max(compacted_through, last_turn - 1)))
    scattered = draw(st.booleans())
    kinds = ["plain", "tool", "late"] if cross_turn_tools else ["plain", "tool"]
    by_turn: dict[int, list[ChatMessage]] = {}
    evicted: set[int] = set()
    links: list[tuple[int, int]] = []  # (turn of the call, turn of its result)
    for turn in range(compacted_through + 1, last_turn + 1):
        owed = bool(links) and links[-1][1] == turn  # the previous turn's call is answered here
        kind = draw(st.sampled_from(kinds))
        if kind == "late" and turn < last_turn:
            call = ToolCall(id=f"late-{turn}", name="lookup", arguments="{}")
            by_turn[turn] = [
                msg(turn, 0, "user", "q"),
                msg(turn, 1, "assistant", tool_calls=(call,)),
            ]
            links.append((turn, turn + 1))
        else:
            by_turn[turn] = tool_turn(turn) if kind == "tool" else plain_turn(turn)
        if owed:
            by_turn[turn].append(
                msg(turn, 9, "tool", "late result", tool_call_id=f"late-{turn - 1}")
            )
        if turn <= evicted_through or (scattered and turn < last_turn and draw(st.booleans())):
            evicted.add(turn)
    while half := {t for a, b in links if (a in evicted) != (b in evicted) for t in (a, b)}:
        evicted |= half  # the window evicts turns linked by a tool call together
    if draw(st.integers(0, 9)) == 0:  # the working memory expired
        evicted = set(by_turn)
    messages = tuple(m for turn, items in by_turn.items() if turn not in evicted for m in items)
    return Case(
        memory=WorkingMemory(
            messages=messages, pending_compaction=tuple(sorted(evicted - {last_turn}))
        ),
        last_turn=last_turn,
        compacted_through=compacted_through,
        token_pressure=draw(st.booleans()),
    )


def _due(case: Case, turn: int) -> bool:
    """Whether ``turn`` is evicted or, under token pressure, older than the last four."""
    in_window = turn in {m.turn for m in case.memory.messages}
    return not in_window or (case.token_pressure and turn <= case.last_turn - KEEP_RAW_TURNS)


def _choose(case: Case) -> tuple[int, ...]:
    return turns_to_compact(
        case.memory,
        last_turn=case.last_turn,
        compacted_through=case.compacted_through,
        token_pressure=case.token_pressure,
    )


@SETTINGS
@given(cases())
def test_chosen_turns_are_a_contiguous_prefix_and_apply_keeps_the_rest(case: Case) -> None:
    """Chosen turns: a gapless run of due turns from compacted_through+1; the rest stays."""
    chosen = _choose(case)
    start = case.compacted_through + 1
    assert chosen == tuple(range(start, start + len(chosen)))
    assert case.last_turn not in chosen
    assert all(_due(case, turn) for turn in chosen)
    following = start + len(chosen)
    assert following >= case.last_turn or not _due(case, following)  # stops only where it must
    after = apply_compaction(case.memory, turns=chosen, rolling_summary="summary")
    assert after.messages == tuple(m for m in case.memory.messages if m.turn not in chosen)
    assert set(after.pending_compaction) == set(case.memory.pending_compaction) - set(chosen)
    assert apply_compaction(after, turns=chosen, rolling_summary="summary") == after


@SETTINGS
@given(cases(cross_turn_tools=True))
def test_compaction_never_separates_a_tool_call_from_its_result(case: Case) -> None:
    """With tool results answered in a later turn, folding leaves no orphan call or result."""
    assert orphans(case.memory.messages) == []
    chosen = _choose(case)
    start = case.compacted_through + 1
    assert chosen == tuple(range(start, start + len(chosen)))
    assert case.last_turn not in chosen
    after = apply_compaction(case.memory, turns=chosen, rolling_summary="summary")
    assert orphans(after.messages) == []
    following = start + len(chosen)  # stops only where it must: one more would split a pair
    if following < case.last_turn and _due(case, following):
        longer = apply_compaction(case.memory, turns=(*chosen, following), rolling_summary="s")
        assert orphans(longer.messages)


# --- bounded batches and lenient lengths ------------------------------------------------


def test_a_backlog_is_folded_in_bounded_batches_oldest_first() -> None:
    """At most MAX_TURNS_PER_BATCH turns per batch, the oldest; finalize is capped too."""
    memory = memory_of([39, 40])
    chosen = turns_to_compact(memory, last_turn=40, compacted_through=0, token_pressure=False)
    assert chosen == tuple(range(1, MAX_TURNS_PER_BATCH + 1))
    final = turns_to_compact(
        memory, last_turn=40, compacted_through=30, token_pressure=False, finalize=True
    )
    assert final == tuple(range(31, 41))[:MAX_TURNS_PER_BATCH]


def test_over_long_summarizer_fields_are_shortened_not_rejected() -> None:
    """A chatty summarizer still compacts: the summary keeps its newest end, lists and texts
    are cut to their limits."""
    output = parse_summarizer_output(
        json.dumps(
            {
                "rolling_summary": "old " * 600 + "NEWEST",
                "episode_summary": "e" * 900,
                "episode_tags": [f"t{i}" for i in range(12)],
                "salience": 0.5,
                "facts": [{"fact": "f" * 400, "tags": [], "confidence": 0.5}] * 25,
                "profile": [],
            }
        )
    )
    assert output is not None
    assert COUNTER.count(output.rolling_summary) <= SUMMARY_MAX_TOKENS
    assert output.rolling_summary.endswith("NEWEST")
    assert output.rolling_summary.startswith("…")
    assert len(output.episode_summary) == 600
    assert len(output.episode_tags) == 8
    assert len(output.facts) == 20
    assert len(output.facts[0].fact) == 300
