"""``call_model``: the prompt assembled from memory and the bounded window
(``memory/context.py``), and the model's reply (streamed to ``reply_to`` when the event
has one)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import structlog

from llm_bot.graph.reply_stream import stream_for
from llm_bot.graph.state import GraphState
from llm_bot.memory.context import (
    EPISODES_SHARE,
    AssembledContext,
    ContextBudget,
    assemble_context,
)
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.tokens import TokenCounter
from llm_bot.memory.working import Recalled
from llm_bot.ports import ChatModel, ReplyChannel
from llm_bot.service.personas import Persona
from llm_bot.service.retriever import Retrieval
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


async def call_model(
    state: GraphState,
    *,
    model: ChatModel,
    budget: ContextBudget,
    counter: TokenCounter,
    metrics: Metrics,
    replies: ReplyChannel | None,
    stream_interval: float,
) -> dict[str, Any]:
    """Assemble the context from memory and the bounded window, and call the model."""
    recalled = state["recalled"]
    retrieval = state.get("retrieval")
    persona = state["persona"]
    context = prompt_context(
        persona, recalled, state["messages"], retrieval, budget=budget, counter=counter
    )
    if context.over_budget:
        log.error("context.over_budget", tokens=context.tokens, budget=context.budget)
    elif context.dropped["window_turns"] or context.shortened:
        log.info(
            "context.trimmed",
            window_turns_dropped=context.dropped["window_turns"],
            shortened=context.shortened,
        )
    if retrieval is not None:
        metrics.recalled_items.observe(context.recalled_items)
    prompt = context.messages
    metrics.window_messages.observe(len(state["messages"]))
    key = state["event"].key
    stream = stream_for(state["event"], replies, stream_interval)
    reply = await model.complete(
        prompt,
        conversation_id=key.conversation_id,
        cache_key=prompt_cache_key(key.tenant_id, key.user_id),
        tools=state.get("tools", ()),
        on_delta=stream,
        model=persona.model,
    )
    if stream is not None:
        await stream.flush()
    log.info(
        "model.replied",
        model=reply.model,
        input_tokens=reply.input_tokens,
        cached_input_tokens=reply.cached_input_tokens,
        output_tokens=reply.output_tokens,
        tool_calls=len(reply.tool_calls),
        window_messages=len(state["messages"]),
    )
    return {"context": context, "reply": reply}


def prompt_context(
    persona: Persona,
    recalled: Recalled,
    window: Sequence[ChatMessage],
    retrieval: Retrieval | None,
    *,
    budget: ContextBudget,
    counter: TokenCounter,
) -> AssembledContext:
    """The prompt ``call_model`` sends (and the inspector's dry run shows): the latest
    episodes within ``EPISODES_SHARE`` of the input budget."""
    return assemble_context(
        system_prompt=persona.system_prompt,
        bundle=recalled.bundle,
        summary=recalled.memory.summary,
        window=window,
        budget=budget,
        counter=counter,
        recalled=retrieval.records if retrieval is not None else (),
        carried=_last_selection(recalled),
        episodes_tokens=int(EPISODES_SHARE * budget.input_budget),
    )


def prompt_cache_key(tenant_id: str, user_id: str) -> str:
    """The provider's ``prompt_cache_key`` for one user: their prompts share the system
    prompt and memory block, so routing them together lets the cache hit. A digest, so
    the provider never learns tenant or user ids."""
    digest = hashlib.sha256(f"{tenant_id}|{user_id}".encode()).hexdigest()[:32]
    return f"llmbot-{digest}"


def _last_selection(recalled: Recalled) -> frozenset[str]:
    """Ids of what the previous turn recalled (the conversation's topic selection)."""
    topic = recalled.memory.topic
    return frozenset(topic.recalled) if topic else frozenset()
