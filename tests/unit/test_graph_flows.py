"""The ``flow`` step (``graph/flow_turns.py``) and the replay of duplicates
(``graph/duplicates.py``), through the compiled graph on in-memory checkpoints: a flow
persona's message starts its flow, the answers advance it without a model call, the
ending turn carries the result, and a redelivery republishes it only while the flow's
checkpoint says it may not have gone out."""

from __future__ import annotations

from llm_bot.graph.duplicates import DuplicateReplay
from llm_bot.graph.flow_turns import flow_reply
from llm_bot.graph.state import GraphState
from llm_bot.graph.tool_rounds import RoundDeadlines
from tests.support.reply_path import (
    FLOW_PERSONAS,
    KEY,
    ReplyPath,
    function,
    message,
    reply_path,
    tool_calls_reply,
)

PERSONAS = FLOW_PERSONAS


def flow_path() -> ReplyPath:
    return reply_path(personas=PERSONAS, flows=PERSONAS.flows)


async def test_a_flow_persona_starts_its_flow_without_a_model_call() -> None:
    """The flow's intro and first question are the reply; the model is not called."""
    path = flow_path()
    run = await path.runner.run(message("hi", persona="checkin"), None)
    assert run.route == "flow"
    assert run.candidate is not None
    assert "How are you, 1 to 10?" in run.candidate.text
    assert run.candidate.model == "flow:checkin"
    assert path.model.calls == []
    assert KEY in path.flow_schedule.deadlines


async def test_the_last_answer_ends_the_flow_with_its_result() -> None:
    """The answer to the last question ends the flow: its closing words are the reply,
    the result rides on the run (counted by status); later messages chat again."""
    path = flow_path()
    await path.runner.run(message("hi", persona="checkin"), None)
    run = await path.runner.run(message("7"), None)
    assert run.flow_result is not None
    assert run.flow_result.status == "completed"
    assert run.candidate is not None
    assert run.candidate.text == "Thanks, that's all."
    assert path.counted("llmbot_flow_results", status="completed") == 1
    assert path.flows is not None
    await path.flows.finish(KEY, run.flow_result.id)
    after = await path.runner.run(message("and now?"), None)
    assert (after.route, len(path.model.calls)) == ("reply", 1)


async def test_a_flow_reply_streams_to_reply_to() -> None:
    """With ``reply_to``, the flow's words go out as one delta."""
    path = flow_path()
    assert path.flows is not None
    state: GraphState = {
        "event": message("hi", persona="checkin", reply_to="amq.reply"),
        "recalled": await path.memory.load(KEY, "evt_x"),
    }
    ctx = path.context
    update = await flow_reply(
        state,
        flows=path.flows,
        personas=PERSONAS,
        clock=ctx.clock,
        budget=ctx.budget,
        metrics=ctx.metrics,
        replies=ctx.replies,
        stream_interval=0.0,
    )
    assert path.replies.deltas() == [update["reply"].text]


async def test_a_redelivered_ending_republishes_the_result_until_finished() -> None:
    """Redelivered after the flow ended: the same candidate and result go out again while
    the flow's checkpoint is there; once finished (published), the result is not repeated."""
    path = flow_path()
    await path.runner.run(message("hi", persona="checkin"), None)
    ending = message("7")
    first = await path.runner.run(ending, None)
    again = await path.runner.run(ending, None)
    assert (again.route, again.candidate, again.flow_result) == (
        "duplicate",
        first.candidate,
        first.flow_result,
    )
    assert path.flows is not None
    assert first.flow_result is not None
    await path.flows.finish(KEY, first.flow_result.id)
    late = await path.runner.run(ending, None)
    assert (late.route, late.flow_result) == ("duplicate", None)


async def test_a_duplicate_reschedules_its_open_round() -> None:
    """A redelivery of the reply that opened a round schedules its timeout again (a
    crash after the commit may have lost it)."""
    path = reply_path(script=[tool_calls_reply("a")])
    asked = message("look", tools=(function("a"),))
    await path.runner.run(asked, None)
    path.rounds.deadlines.clear()
    replay = DuplicateReplay(path.clock, RoundDeadlines(path.rounds, 120.0), None)
    recalled = await path.memory.load(KEY, asked.event_id)
    assert recalled.processed is not None
    routed = await replay(asked, recalled, recalled.processed)
    assert isinstance(routed.update, dict)
    assert routed.update["route"] == "duplicate"
    assert KEY in path.rounds.deadlines
