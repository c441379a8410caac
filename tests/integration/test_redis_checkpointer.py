"""The LangGraph checkpointer on plain Redis: LangGraph's own conformance suite, and a real
graph interrupted, "restarted" (a new saver and graph on the same Redis) and resumed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TypedDict

import pytest
import redis.asyncio as aioredis
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from llm_bot.adapters.redis_checkpointer import RedisCheckpointSaver
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


def _thread_key(thread_id: str) -> str:
    return f"{TEST_KEY_PREFIX}:{{cp-{thread_id}}}:flow"


async def test_passes_langgraphs_checkpointer_conformance_suite(
    service_urls: ServiceUrls,
) -> None:
    @checkpointer_test(name="RedisCheckpointSaver")
    async def saver() -> AsyncIterator[RedisCheckpointSaver]:
        client = aioredis.from_url(service_urls.redis_url)
        yield RedisCheckpointSaver(client, thread_key=_thread_key, ttl_seconds=600)
        await client.aclose()

    report = await validate(saver)
    failures = {
        name: result.failures
        for name, result in report.results.items()
        if result.detected and result.passed is not True
    }
    assert report.passed_all_base(), failures
    assert report.passed_all(), failures
    passed = sum(result.tests_passed for result in report.results.values())
    assert passed >= 40  # the suite really ran (it has ~50 base tests)


class _Checkin(TypedDict, total=False):
    mood: str
    sleep: str


def _graph(saver: RedisCheckpointSaver) -> object:
    async def ask_mood(state: _Checkin) -> _Checkin:
        return {"mood": interrupt("How are you feeling, 1 to 10?")}

    async def ask_sleep(state: _Checkin) -> _Checkin:
        return {"sleep": interrupt("Did you sleep well?")}

    graph = StateGraph(_Checkin)
    graph.add_node("ask_mood", ask_mood)
    graph.add_node("ask_sleep", ask_sleep)
    graph.add_edge(START, "ask_mood")
    graph.add_edge("ask_mood", "ask_sleep")
    graph.add_edge("ask_sleep", END)
    return graph.compile(checkpointer=saver)


async def test_an_interrupted_graph_resumes_in_a_new_process_where_it_stopped(
    service_urls: ServiceUrls,
) -> None:
    thread = f"t{uuid.uuid4().hex}"
    config = {"configurable": {"thread_id": thread}}
    first = aioredis.from_url(service_urls.redis_url)
    try:
        graph = _graph(RedisCheckpointSaver(first, thread_key=_thread_key, ttl_seconds=300))
        paused = await graph.ainvoke({}, config)  # type: ignore[attr-defined]
        assert paused["__interrupt__"][0].value == "How are you feeling, 1 to 10?"
        ttl = await first.ttl(_thread_key(thread))
        assert 0 < ttl <= 300
    finally:
        await first.aclose()

    second = aioredis.from_url(service_urls.redis_url)  # "another replica"
    try:
        saver = RedisCheckpointSaver(second, thread_key=_thread_key, ttl_seconds=300)
        graph = _graph(saver)
        paused = await graph.ainvoke(Command(resume="7"), config)  # type: ignore[attr-defined]
        assert paused["__interrupt__"][0].value == "Did you sleep well?"
        done = await graph.ainvoke(Command(resume="yes"), config)  # type: ignore[attr-defined]
        assert done == {"mood": "7", "sleep": "yes"}
        await saver.adelete_thread(thread)
        assert await second.exists(_thread_key(thread)) == 0
    finally:
        await second.aclose()
