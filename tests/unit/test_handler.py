"""``EventHandler`` (``service/handler.py``) over the reply graph on fakes: each event kind
to its outcome, transient failures retried in place, permanent ones dead-lettered, a
redelivery answered from memory, erasure and finalization, the lease held around a run."""

from __future__ import annotations

import json
from typing import Any

from llm_bot.errors import ModelRejected, ModelUnavailable
from llm_bot.memory.conversation_erasure import ConversationPruning
from llm_bot.service.erasure import Eraser
from llm_bot.service.handler import Delivery, EventHandler
from llm_bot.service.outcomes import DeadLetter, Duplicate, Recorded, Replied, Skipped
from llm_bot.service.retry import RetryPolicy
from tests.support.events import message_event, new_id
from tests.support.reply_path import (
    FLOW_PERSONAS,
    KEY,
    ReplyPath,
    function,
    reply_path,
    tool_calls_reply,
)

TOOL = {"tool_call_id": "call_a", "name": "a", "content": "42"}


class NoLongTermMemory:
    """The long-term store's side of forgetting a conversation: nothing to prune."""

    async def forget_conversation(
        self, tenant_id: str, user_id: str, conversation_id: str
    ) -> ConversationPruning:
        return ConversationPruning()


def handler(path: ReplyPath, *, attempts: int = 3) -> EventHandler:
    return EventHandler(
        chats=path.runner,
        flows=path.flows,
        lease=path.lease,
        eraser=Eraser(store=path.memory, ltm=NoLongTermMemory()),
        retry=RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.0),
        max_body_bytes=1 << 20,
        log_content=False,
        metrics=path.metrics,
    )


def delivery(text: str | None = "hello", **extra: Any) -> Delivery:
    reply_to = extra.pop("reply_to", None)
    extra.setdefault("conversation", KEY.conversation_id)
    body = message_event(tenant=KEY.tenant_id, user=KEY.user_id, text=text, **extra)
    return Delivery(body=json.dumps(body).encode(), reply_to=reply_to)


async def test_a_message_is_replied_under_the_lease() -> None:
    """A message: the model's reply as the candidate, the turn's memory job, the commit
    fenced by the lease the handler took."""
    path = reply_path()
    outcome = await handler(path).handle(delivery("hello"))
    assert isinstance(outcome, Replied)
    assert outcome.candidate.text == "echo: hello"
    assert outcome.job is not None
    assert outcome.job.kind == "turn"
    assert path.lease.held[KEY] == 1
    assert path.memory.commits[0].lease_token == "token-1"


async def test_a_message_without_text_is_skipped() -> None:
    """No prompt text: SKIP, nothing committed, no model call."""
    path = reply_path()
    outcome = await handler(path).handle(delivery(None))
    assert isinstance(outcome, Skipped)
    assert (path.memory.commits, path.model.calls) == ([], [])


async def test_a_redelivery_is_answered_from_memory() -> None:
    """The same event again: a duplicate with the first candidate; the model is not
    called again."""
    path = reply_path()
    first = delivery("hello")
    replied = await handler(path).handle(first)
    again = await handler(path).handle(first)
    assert isinstance(replied, Replied)
    assert isinstance(again, Duplicate)
    assert again.candidate == replied.candidate
    assert len(path.model.calls) == 1


async def test_tool_traces_and_transcripts_are_recorded() -> None:
    """A tool call and a transcript are recorded in a turn; the transcript queues a job."""
    path = reply_path()
    recorded = await handler(path).handle(delivery(None, event_type="tool.call", tool=TOOL))
    assert isinstance(recorded, Recorded)
    assert recorded.detail == "tool.call recorded in turn 1"
    said = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
    imported = await handler(path).handle(delivery(None, event_type="transcript", transcript=said))
    assert isinstance(imported, Recorded)
    assert imported.detail == "transcript: 2 messages recorded through turn 2"
    assert imported.job is not None


async def test_a_tool_round_is_answered_and_continued() -> None:
    """The model calls a tool; its result continues the turn with a second model call;
    the same result again is skipped."""
    path = reply_path(script=[tool_calls_reply("a")])
    tools = [function("a")]
    asked = await handler(path).handle(delivery("look it up", tools=tools))
    assert isinstance(asked, Replied)
    assert asked.candidate.kind == "tool_call"
    result = await handler(path).handle(delivery(None, event_type="tool.result", tool=TOOL))
    assert isinstance(result, Replied)
    assert result.candidate.kind == "text"
    again = await handler(path).handle(delivery(None, event_type="tool.result", tool=TOOL))
    assert isinstance(again, Skipped)
    assert again.reason == "tool result for a call already answered"


async def test_a_transient_failure_is_retried_in_place() -> None:
    """The model is down once: retried (counted), then replied."""
    path = reply_path(script=[ModelUnavailable("503")])
    outcome = await handler(path).handle(delivery("hello"))
    assert isinstance(outcome, Replied)
    assert path.counted("llmbot_events", outcome="retried") == 1
    assert len(path.model.calls) == 2


async def test_failures_that_outlast_the_attempts_or_are_permanent_dead_letter() -> None:
    """Down on every attempt, or refusing the request: dead-lettered with the error's code
    and the event's ids; nothing committed."""
    path = reply_path(script=[ModelUnavailable("503")] * 3)
    exhausted = await handler(path, attempts=3).handle(delivery("hello"))
    assert isinstance(exhausted, DeadLetter)
    assert (exhausted.code, exhausted.attempts) == ("model_error", 3)
    assert exhausted.ids is not None
    assert exhausted.ids.conversation_id == KEY.conversation_id
    rejected = await handler(reply_path(script=[ModelRejected("400")])).handle(delivery("hi"))
    assert isinstance(rejected, DeadLetter)
    assert rejected.attempts == 1
    assert path.memory.commits == []


async def test_a_body_that_is_not_an_event_is_dead_lettered() -> None:
    """Not JSON: ``invalid_event``, without retries."""
    outcome = await handler(reply_path()).handle(Delivery(body=b"{not json"))
    assert isinstance(outcome, DeadLetter)
    assert outcome.code == "invalid_event"


async def test_forget_erases_and_end_queues_finalization() -> None:
    """``memory.forget`` of a conversation erases it (a new message starts at turn 1);
    ``conversation.end`` queues the finalize job."""
    path = reply_path()
    await handler(path).handle(delivery("hello"))
    forget = delivery(None, event_type="memory.forget")
    forgotten = await handler(path).handle(forget)
    assert isinstance(forgotten, Recorded)
    assert forgotten.detail.startswith("erased ")
    assert (await path.memory.load(KEY, new_id("evt"))).last_turn == 0
    ended = await handler(path).handle(delivery(None, event_type="conversation.end"))
    assert isinstance(ended, Recorded)
    assert ended.job is not None
    assert ended.job.kind == "finalize"


async def test_reply_to_streams_the_reply() -> None:
    """A delivery with ``reply_to``: the reply streams there as it is generated."""
    path = reply_path()
    await handler(path).handle(delivery("hello", reply_to="amq.rabbitmq.reply-to"))
    assert "".join(path.replies.deltas()) == "echo: hello"


async def test_a_lease_that_came_with_the_delivery_is_used() -> None:
    """The fair queue hands the conversation over with its lease: the handler takes no
    lease of its own and commits under the token it was given."""
    path = reply_path()
    async with path.lease.hold(KEY) as token:
        leased = delivery("hello")
        given = Delivery(body=leased.body, lease_token=token)
        outcome = await handler(path).handle(given)
    assert isinstance(outcome, Replied)
    assert path.lease.held[KEY] == 1
    assert path.memory.commits[0].lease_token == token


async def test_a_published_flow_result_finishes_the_flow() -> None:
    """Once the outcome that ended a flow was published, the flow's checkpoint goes (a
    redelivery then republishes the candidate without the result)."""
    path = reply_path(personas=FLOW_PERSONAS, flows=FLOW_PERSONAS.flows)
    events = handler(path)
    await events.handle(delivery("hi", metadata={"persona": "checkin"}))
    ending = delivery("7")
    ended = await events.handle(ending)
    assert isinstance(ended, Replied)
    assert ended.flow_result is not None
    assert path.flows is not None
    assert await path.flows.holds(KEY, ended.flow_result.id)
    await events.published(ended)
    assert not await path.flows.holds(KEY, ended.flow_result.id)
    again = await events.handle(ending)
    assert isinstance(again, Duplicate)
    assert again.flow_result is None
