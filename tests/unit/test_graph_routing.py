"""The entry node's routing (``graph/routing.py``): each command kind to its route without
a model call, and a message to the conversation's flow when one runs or is asked for."""

from __future__ import annotations

import pytest
from langgraph.graph import END

from llm_bot.graph.routing import route_event, route_to_flow_or_chat
from llm_bot.service.commands import ChatEvent
from llm_bot.service.flow_runner import FlowStart
from tests.support.reply_path import (
    FLOW_PERSONAS,
    KEY,
    START,
    message,
    reply_path,
    tool_call,
    tool_result,
    transcript,
)

PERSONAS = FLOW_PERSONAS


@pytest.mark.parametrize(
    ("event", "route", "goto"),
    [
        (message("hello"), "reply", "recall"),
        (message("  \n "), "skip", END),
        (tool_call("call_1", "lookup"), "tool", "recall"),
        (tool_result("call_1"), "tool", "recall"),
        (transcript(("user", "hi"), ("assistant", "hello")), "transcript", "recall"),
    ],
)
def test_each_command_kind_has_its_route(event: ChatEvent, route: str, goto: str) -> None:
    """Messages reply (or SKIP without text); tool traces and transcripts are recorded."""
    command = route_event(event)
    assert command.update == {"route": route}
    assert command.goto == goto


async def test_without_flows_the_supervisor_routes_as_ingest() -> None:
    """No flow runner: the supervisor's route is ``route_event``'s."""
    routed = await route_to_flow_or_chat(message("hi"), personas=PERSONAS, flows=None)
    assert routed.update == {"route": "reply"}


async def test_a_message_naming_a_flow_persona_goes_to_the_flow() -> None:
    """``metadata.persona`` naming a flow persona starts its flow."""
    path = reply_path(personas=PERSONAS, flows=PERSONAS.flows)
    routed = await route_to_flow_or_chat(
        message("start", persona="checkin"), personas=PERSONAS, flows=path.flows
    )
    assert (routed.update, routed.goto) == ({"route": "flow"}, "recall")


async def test_messages_go_to_a_running_flow_and_tool_traces_do_not() -> None:
    """While the conversation's flow runs, its messages answer it; a blank message is
    still skipped and a tool trace still recorded."""
    path = reply_path(personas=PERSONAS, flows=PERSONAS.flows)
    assert path.flows is not None
    plain = await route_to_flow_or_chat(message("hi"), personas=PERSONAS, flows=path.flows)
    assert plain.update == {"route": "reply"}
    await path.flows.turn(
        KEY,
        event_id="evt_start",
        text="start",
        now=START,
        start=FlowStart("checkin", "checkin"),
        erasure="",
    )
    routed = await route_to_flow_or_chat(message("7"), personas=PERSONAS, flows=path.flows)
    assert routed.update == {"route": "flow"}
    blank = await route_to_flow_or_chat(message(" "), personas=PERSONAS, flows=path.flows)
    assert (blank.update, blank.goto) == ({"route": "skip"}, END)
    traced = await route_to_flow_or_chat(tool_result("c"), personas=PERSONAS, flows=path.flows)
    assert traced.update == {"route": "tool"}
