"""``recall`` (``graph/recall.py``) on the in-memory store: the turn numbered, the window
extended, the route onwards; a redelivery ends as a duplicate; a load failure propagates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langgraph.graph import END
from langgraph.types import Command
from opentelemetry.trace import NoOpTracer

from llm_bot.errors import MemoryUnavailable
from llm_bot.graph.duplicates import DuplicateReplay
from llm_bot.graph.recall import recall_turn
from llm_bot.graph.state import GraphState
from llm_bot.graph.tool_rounds import RoundDeadlines
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.window import bounded_messages
from llm_bot.service.chat_runs import Route
from llm_bot.service.commands import ChatEvent
from llm_bot.service.personas import Persona, PersonaCatalog
from llm_bot.service.retriever import RetrievalSettings, Retriever
from tests.support.in_memory_index import InMemoryRecallIndex
from tests.support.reply_path import (
    KEY,
    ReplyPath,
    function,
    message,
    reply_path,
    tool_call,
    tool_calls_reply,
    tool_result,
    transcript,
)


async def recall(
    path: ReplyPath, event: ChatEvent, route: Route, retriever: Retriever | None = None
) -> Command[str]:
    ctx = path.context
    state: GraphState = {"event": event, "route": route}
    return await recall_turn(
        state,
        memory=ctx.memory,
        personas=ctx.persona_catalog,
        retriever=retriever,
        bounds=ctx.bounds,
        max_tool_rounds=ctx.max_tool_rounds,
        metrics=ctx.metrics,
        replay=DuplicateReplay(ctx.clock, RoundDeadlines(path.rounds, 120.0), None),
    )


def update(command: Command[str]) -> dict[str, Any]:
    assert isinstance(command.update, dict)
    return command.update


async def test_a_first_message_opens_turn_one_and_goes_to_the_model() -> None:
    """Empty memory: the message is turn 1, seq 0, in the window; the model is next;
    retrieval is off (counted)."""
    path = reply_path()
    event = message("hello")
    routed = await recall(path, event, Route.REPLY)
    assert routed.goto == "call_model"
    state = update(routed)
    assert (state["route"], state["turn"]) == ("reply", 1)
    [added] = state["turn_messages"]
    assert (added.role, added.content, added.turn, added.seq) == ("user", "hello", 1, 0)
    assert bounded_messages([], state["messages"]) == [added]
    assert state["persona"].name == "default"
    assert path.counted("llmbot_retrieval_searches", outcome="off") == 1


async def test_a_message_after_earlier_turns_opens_the_next_turn() -> None:
    """Two turns committed: the next message is turn 3 and the window holds all of it."""
    path = reply_path()
    for text in ("one", "two"):
        await path.runner.run(message(text), None)
    state = update(await recall(path, message("three"), Route.REPLY))
    assert state["turn"] == 3
    assert len(bounded_messages([], state["messages"])) == 5


async def test_a_redelivered_event_ends_as_a_duplicate() -> None:
    """An event committed before: route ``duplicate``, its candidate and memory job again,
    and nothing goes on to the model."""
    path = reply_path()
    event = message("hello")
    first = await path.runner.run(event, None)
    routed = await recall(path, event, Route.REPLY)
    assert routed.goto == END
    state = update(routed)
    assert state["route"] == "duplicate"
    assert state["candidate"] == first.candidate
    assert first.job is not None
    assert state["job"].id == first.job.id


async def test_tool_traces_and_transcripts_go_to_remember() -> None:
    """A tool call joins the current turn (at least turn 1); a transcript is numbered
    message by message; neither calls the model."""
    path = reply_path()
    call = update(routed := await recall(path, tool_call("call_1", "lookup"), Route.TOOL))
    assert routed.goto == "remember"
    [traced] = call["turn_messages"]
    assert (traced.role, traced.turn, traced.tool_calls[0].id) == ("assistant", 1, "call_1")
    imported = await recall(
        path, transcript(("user", "hi"), ("assistant", "hello")), Route.TRANSCRIPT
    )
    assert imported.goto == "remember"
    assert [(m.role, m.turn) for m in update(imported)["turn_messages"]] == [
        ("user", 1),
        ("assistant", 1),
    ]


async def test_the_last_result_of_a_round_continues_the_turn() -> None:
    """The model asked for two tools; the first result is only recorded, the second
    completes the round: route ``continue`` to the model, with the round's tools."""
    path = reply_path(script=[tool_calls_reply("a", "b")])
    await path.runner.run(message("look up", tools=(function("a"), function("b"))), None)
    first = await path.runner.run(tool_result("call_a"), None)
    assert first.route == "tool"
    routed = await recall(path, tool_result("call_b"), Route.TOOL)
    assert routed.goto == "call_model"
    state = update(routed)
    assert (state["route"], state["rounds_done"]) == ("continue", 1)
    assert [t["function"]["name"] for t in state["tools"]] == ["a", "b"]
    assert path.counted("llmbot_tool_rounds", result="completed") == 1


async def test_a_result_already_answered_changes_nothing() -> None:
    """A second result for the same call: route ``tool_duplicate``, nothing added."""
    path = reply_path(script=[tool_calls_reply("a", "b")])
    await path.runner.run(message("look up", tools=(function("a"), function("b"))), None)
    await path.runner.run(tool_result("call_a"), None)
    routed = await recall(path, tool_result("call_a"), Route.TOOL)
    assert (routed.goto, update(routed)["route"]) == (END, "tool_duplicate")


async def test_a_message_closes_the_open_round_first() -> None:
    """A user message while calls await results: "no result" tool messages close them,
    before the message, in the same turn's window (counted as ``closed``)."""
    path = reply_path(script=[tool_calls_reply("a")])
    await path.runner.run(message("look up", tools=(function("a"),)), None)
    state = update(await recall(path, message("never mind"), Route.REPLY))
    roles = [(m.role, m.tool_call_id) for m in state["turn_messages"]]
    assert roles == [("tool", "call_a"), ("user", None)]
    assert state["tool_round"] is None
    assert path.counted("llmbot_tool_rounds", result="closed") == 1


async def test_the_persona_asked_for_or_remembered_answers() -> None:
    """``metadata.persona`` chooses the persona; a later message without one keeps it."""
    personas = PersonaCatalog(
        default=Persona("default", "You help."),
        named={"pirate": Persona("pirate", "Arr.", retrieval=False)},
    )
    path = reply_path(personas=personas)
    asked = update(await recall(path, message("ahoy", persona="pirate"), Route.REPLY))
    assert asked["persona"].name == "pirate"
    await path.runner.run(message("ahoy", persona="pirate"), None)
    later = update(await recall(path, message("and then?"), Route.REPLY))
    assert later["persona"].name == "pirate"


async def test_a_message_recalls_from_the_users_index_what_the_window_lacks() -> None:
    """With a retriever: what the user said in another conversation is recalled (searched,
    keyword-only without an embedder); what the window already shows is not."""
    path = reply_path()
    index = InMemoryRecallIndex.on(path.erasures)
    retriever = Retriever(
        embedder=None,
        index=index,
        settings=RetrievalSettings(min_score=0.0, topic_similarity=0.99, max_tokens=500),
        metrics=path.metrics,
        tracer=NoOpTracer(),
    )
    said = [
        _entry("m|c0|e1", "My cat Biscuit hates the vet", conversation="c0"),
        _entry("m|c1|e2", "Biscuit sleeps all day", conversation=KEY.conversation_id),
    ]
    vectors = [(e, np.zeros((1, 4), dtype=np.float32)) for e in said]
    await index.upsert(KEY.tenant_id, KEY.user_id, vectors, model="none", erasure="")
    window = await path.runner.run(message("hi", event_id="e2"), None)
    assert window.route == "reply"
    state = update(await recall(path, message("what about Biscuit?"), Route.REPLY, retriever))
    retrieval = state["retrieval"]
    assert retrieval.outcome == "searched"
    assert [r.id for r in retrieval.records] == ["m|c0|e1"]


def _entry(entry_id: str, text: str, *, conversation: str) -> IndexEntry:
    return IndexEntry(
        id=entry_id,
        kind="message",
        text=text,
        speaker="Ann",
        date="2025-07-01T09:00:00+00:00",
        conversation_id=conversation,
        turn=1,
        seq=0,
        source_id=f"{entry_id.rsplit('|', 1)[-1]}:user",  # the message's id
        terms=tuple(keyword_terms(f"Ann {text}")),
    )


async def test_a_failed_load_propagates() -> None:
    """The store is down: ``MemoryUnavailable`` (retryable) reaches the handler."""
    path = reply_path()
    path.memory.fail("load", MemoryUnavailable("redis down"))
    with pytest.raises(MemoryUnavailable):
        await recall(path, message("hello"), Route.REPLY)
