"""The tool round's steps (``graph/tool_rounds.py``): what each event does to the open
round, and the worker's timeout schedule kept in step with it."""

from __future__ import annotations

from llm_bot.graph.tool_rounds import RoundDeadlines, tool_step, turn_start
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tool_rounds import ToolRound
from llm_bot.memory.working import Recalled, WorkingMemory
from llm_bot.service.chat_runs import Route
from llm_bot.service.personas import Persona
from llm_bot.service.tool_catalog import ToolCatalog
from tests.support.in_memory_flows import InMemorySchedule
from tests.support.reply_path import KEY, function, message, tool_call, tool_result

OPENED = "2025-07-30T10:00:00+00:00"
TOOLS = (function("a"), function("b"))


def open_round(*answered: str, round_number: int = 1) -> ToolRound:
    return ToolRound(
        round=round_number,
        turn=1,
        calls=("call_a", "call_b"),
        names=("a", "b"),
        tools=TOOLS,
        opened_at=OPENED,
        answered=answered,
    )


def recalled(tool_round: ToolRound | None, *messages: ChatMessage) -> Recalled:
    memory = WorkingMemory(messages=messages, tool_round=tool_round)
    return Recalled(memory=memory, last_turn=1, version=1, processed=None)


def test_a_message_with_no_open_round_offers_its_tools() -> None:
    """No round open: the message's own tools (else the persona's) are offered."""
    step = tool_step(Route.REPLY, message("hi"), recalled(None), 5, TOOLS)
    assert (step.route, step.tools, step.closing) == ("reply", TOOLS, ())


def test_a_result_for_an_open_call_is_recorded_until_the_last() -> None:
    """The first of two results answers its call; the round stays open."""
    step = tool_step(Route.TOOL, tool_result("call_a"), recalled(open_round()), 5, ())
    assert step.route == "tool"
    assert step.tool_round is not None
    assert step.tool_round.answered == ("call_a",)


def test_the_last_result_continues_with_the_tools_until_the_round_limit() -> None:
    """The round's last result continues the turn; past ``max_rounds`` rounds the model
    gets no tools (it must answer in text)."""
    event = tool_result("call_b")
    step = tool_step(Route.TOOL, event, recalled(open_round("call_a")), 5, ())
    assert (step.route, step.tools, step.rounds_done) == ("continue", TOOLS, 1)
    last = tool_step(Route.TOOL, event, recalled(open_round("call_a", round_number=5)), 5, ())
    assert (last.route, last.tools) == ("continue", ())


def test_unknown_and_answered_calls() -> None:
    """A result for a call the round does not know is only recorded; one already answered
    (in the round, or in the window) is a duplicate."""
    unknown = tool_step(Route.TOOL, tool_result("call_z"), recalled(open_round()), 5, ())
    assert (unknown.route, unknown.tool_round) == ("tool", open_round())
    again = tool_step(Route.TOOL, tool_result("call_a"), recalled(open_round("call_a")), 5, ())
    assert again.route == "tool_duplicate"
    answered = ChatMessage(
        id="r", role="tool", content="ok", created_at=OPENED, turn=1, seq=2, tool_call_id="c9"
    )
    window = tool_step(Route.TOOL, tool_result("c9"), recalled(None, answered), 5, ())
    assert window.route == "tool_duplicate"


def test_a_tool_call_trace_leaves_the_round_as_it_is() -> None:
    """The client's own calls are recorded; the service's round is not touched."""
    step = tool_step(Route.TOOL, tool_call("call_x", "x"), recalled(open_round()), 5, ())
    assert (step.route, step.tool_round) == ("tool", open_round())


def test_turn_start_puts_the_closing_messages_before_the_message() -> None:
    """A message while calls are open: "no result" for each, then the user message."""
    persona = Persona("p", "", tools=ToolCatalog(TOOLS))
    step, added = turn_start(
        Route.REPLY, message("moving on"), recalled(open_round()), persona, max_rounds=5
    )
    assert [m.role for m in added] == ["tool", "tool", "user"]
    assert step.tools == TOOLS
    dup, nothing = turn_start(
        Route.TOOL, tool_result("call_a"), recalled(open_round("call_a")), persona, max_rounds=5
    )
    assert (dup.route, nothing) == ("tool_duplicate", [])


async def test_a_round_is_scheduled_once_and_unscheduled_when_it_closes() -> None:
    """Opened: its deadline is the opening time plus the timeout; still open after a
    result: not scheduled again; closed: unscheduled; without a scheduler: nothing."""
    schedule = InMemorySchedule()
    deadlines = RoundDeadlines(schedule, 120.0)
    await deadlines.keep(KEY, None, open_round())
    opened = schedule.deadlines[KEY]
    assert opened == 120.0 + 1753869600.0
    schedule.deadlines[KEY] = 0.0
    await deadlines.keep(KEY, open_round(), open_round("call_a"))
    assert schedule.deadlines[KEY] == 0.0
    await deadlines.keep(KEY, open_round("call_a"), None)
    assert KEY not in schedule.deadlines
    await RoundDeadlines(None, 120.0).keep(KEY, None, open_round())
