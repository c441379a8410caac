"""``remember`` (``graph/commit.py``) on the in-memory store: one atomic commit of the
window, the raw trace and the processed record; the session remembers language and
persona; the round's timeout schedule follows; a refused commit propagates."""

from __future__ import annotations

import pytest

from llm_bot.errors import MemoryConflict
from llm_bot.graph.commit import commit_turn, turn_job
from llm_bot.graph.state import GraphState
from llm_bot.graph.tool_rounds import RoundDeadlines
from llm_bot.memory.messages import ChatMessage
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent
from llm_bot.service.personas import Persona
from tests.support.reply_path import (
    KEY,
    START,
    ReplyPath,
    function,
    message,
    reply_path,
    tool_calls_reply,
)


async def remember(path: ReplyPath, graph_state: GraphState) -> dict[str, object]:
    ctx = path.context
    return await commit_turn(
        graph_state,
        memory=ctx.memory,
        bounds=ctx.bounds,
        clock=ctx.clock,
        deadlines=RoundDeadlines(path.rounds, 120.0),
        metrics=ctx.metrics,
    )


async def recorded_state(path: ReplyPath, event: ChatEvent, **extra: object) -> GraphState:
    recalled = await path.memory.load(event.key, event.event_id)
    asked = ChatMessage(
        id=f"{event.event_id}:user",
        role="user",
        content="hi",
        created_at=START.isoformat(),
        turn=recalled.last_turn + 1,
        seq=0,
        event_id=event.event_id,
    )
    graph_state: GraphState = {
        "event": event,
        "route": Route.REPLY,
        "recalled": recalled,
        "turn": recalled.last_turn + 1,
        "turn_messages": [asked],
        "messages": [*recalled.memory.messages, asked],
        "persona": Persona("pirate", "Arr."),
    }
    graph_state.update(extra)  # type: ignore[typeddict-item]  # GraphState keys only
    return graph_state


async def test_a_turn_is_committed_with_its_trace_record_and_job() -> None:
    """Window, trace and processed record in one commit; the session keeps the message's
    language and persona; the job is the turn's (its id derived from the event)."""
    path = reply_path()
    event = message("hi", lang="de")
    update = await remember(path, await recorded_state(path, event))
    [commit] = path.memory.commits
    assert commit.memory.session == {"language": "de", "persona": "pirate"}
    assert [m.id for m in commit.trace] == [f"{event.event_id}:user"]
    assert commit.processed is not None
    assert commit.processed.event_id == event.event_id
    assert update["job"] == turn_job(event, 1, None, START)
    recalled = await path.memory.load(KEY, "evt_next")
    assert (recalled.last_turn, recalled.version) == (1, 1)


async def test_a_flow_turn_leaves_the_chat_persona_alone() -> None:
    """Messages answered by a flow do not make the flow the conversation's persona."""
    path = reply_path()
    graph_state = await recorded_state(path, message("7"), route="flow")
    await remember(path, graph_state)
    assert "persona" not in path.memory.commits[0].memory.session


async def test_an_opened_round_is_scheduled_and_a_closed_one_unscheduled() -> None:
    """The round the reply opened gets its timeout; the next commit that closes it drops
    the timeout."""
    path = reply_path(script=[tool_calls_reply("a")])
    await path.runner.run(message("look", tools=(function("a"),)), None)
    assert KEY in path.rounds.deadlines
    graph_state = await recorded_state(path, message("never mind"), tool_round=None)
    await remember(path, graph_state)
    assert KEY not in path.rounds.deadlines


async def test_a_conflicting_commit_propagates_and_writes_nothing() -> None:
    """Another event committed since the load: ``MemoryConflict`` (the handler retries)."""
    path = reply_path()
    stale = await recorded_state(path, message("first"))
    await path.runner.run(message("meanwhile"), None)
    with pytest.raises(MemoryConflict):
        await remember(path, stale)
    assert len(path.memory.commits) == 1


def test_the_job_id_is_the_same_on_every_redelivery() -> None:
    """A redelivered turn queues the same job (the worker does it once)."""
    event = message("hi")
    assert turn_job(event, 3, 10, START).id == turn_job(event, 3, None, START).id
    assert turn_job(event, 3, 10, START).prompt_tokens == 10
