"""``call_model`` (``graph/model_call.py``): the assembled prompt goes to the model with
the user's cache key, the offered tools and the persona's model; a reply with a
``reply_to`` streams there."""

from __future__ import annotations

from llm_bot.graph.model_call import call_model, prompt_cache_key
from llm_bot.graph.state import GraphState
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.working import Recalled, WorkingMemory
from llm_bot.ports import ModelReply
from llm_bot.service.personas import Persona
from tests.support.reply_path import KEY, ReplyPath, function, message, reply_path

ASKED = ChatMessage(
    id="e:user",
    role="user",
    content="what now?",
    created_at="2025-07-30T10:00:00+00:00",
    turn=1,
    seq=0,
)


def state(persona: Persona, *, reply_to: str | None = None) -> GraphState:
    recalled = Recalled(
        memory=WorkingMemory(summary="They like tea."), last_turn=0, version=0, processed=None
    )
    return {
        "event": message("what now?", reply_to=reply_to),
        "recalled": recalled,
        "persona": persona,
        "messages": [ASKED],  # the window as the reducer left it
        "tools": (function("lookup"),),
    }


async def call(path: ReplyPath, graph_state: GraphState) -> dict[str, object]:
    ctx = path.context
    return await call_model(
        graph_state,
        model=ctx.model,
        budget=ctx.budget,
        counter=ctx.counter,
        metrics=ctx.metrics,
        replies=ctx.replies,
        stream_interval=0.0,
    )


async def test_the_prompt_tools_cache_key_and_model_go_to_the_model() -> None:
    """System prompt and summary first, the window's message last; the tools offered, the
    persona's model, the conversation, and the user's cache key."""
    path = reply_path()
    persona = Persona("p", "You are terse.", model="big-model")
    update = await call(path, state(persona))
    [sent] = path.model.calls
    assert sent.messages[0] == {"role": "system", "content": "You are terse."}
    assert "They like tea." in str(sent.messages)
    assert sent.messages[-1] == {"role": "user", "content": "what now?"}
    assert [t["function"]["name"] for t in sent.tools] == ["lookup"]
    assert (sent.model, sent.conversation_id) == ("big-model", KEY.conversation_id)
    assert sent.cache_key == prompt_cache_key(KEY.tenant_id, KEY.user_id)
    assert not sent.streamed
    assert update["reply"] == ModelReply("echo: what now?", "big-model", 30, 5)


async def test_a_reply_to_streams_the_reply_in_pieces() -> None:
    """With ``reply_to``: the model streams, each piece goes out as a delta (the first at
    once, the rest flushed at the end), adding up to the reply."""
    path = reply_path()
    await call(path, state(Persona("p", "You help."), reply_to="amq.reply"))
    assert path.model.calls[0].streamed
    assert "".join(path.replies.deltas()) == "echo: what now?"
    assert {to for to, _, _ in path.replies.sent} == {"amq.reply"}


def test_the_cache_key_is_a_digest_of_tenant_and_user() -> None:
    """Stable per user, distinct between users, and without their ids in it."""
    key = prompt_cache_key("acme", "ann")
    assert key == prompt_cache_key("acme", "ann") != prompt_cache_key("acme", "bob")
    assert key.startswith("llmbot-")
    assert "acme" not in key
    assert "ann" not in key
