"""Personas through the broker: each event is answered by the persona it names (system
prompt, model, tools, retrieval), a conversation keeps its persona, unknown ones are
invalid events."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, ToolCalls
from tests.support.events import message_event, new_id
from tests.support.harness import bot

pytestmark = pytest.mark.integration

PERSONAS = """
default: companion
personas:
  companion:
    system_prompt: You are a warm companion.
  orders:
    system_prompt: You answer questions about orders.
    model: orders-model
    retrieval: false
    tools:
      - type: function
        function:
          name: lookup_order
          parameters: {type: object, properties: {order_id: {type: string}}}
"""


def _system(request_messages: list[dict[str, object]]) -> object:
    return request_messages[0]["content"] if request_messages[0]["role"] == "system" else None


async def test_each_event_is_answered_by_its_persona(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer, tmp_path: Path
) -> None:
    path = tmp_path / "personas.yaml"
    path.write_text(PERSONAS, encoding="utf-8")
    settings = make_settings(personas_path=str(path), system_prompt="service prompt")
    user = new_id("u")
    chat, orders = new_id("chat"), new_id("orders")

    def say(conversation: str, text: str, **metadata: str) -> dict[str, object]:
        return message_event(
            tenant="tp", user=user, conversation=conversation, text=text, metadata=metadata
        )

    async with bot(settings) as (_, client):
        await client.publish(say(chat, "hello there"))
        first = (await client.next_candidate()).body
        fake_model.script(ToolCalls.of(("lookup_order", '{"order_id": "A1"}')))
        await client.publish(say(orders, "where is order A1?", persona="orders"))
        call = (await client.next_candidate()).body
        await client.publish(say(orders, "and order B2?"))  # names none: keeps 'orders'
        later = (await client.next_candidate()).body
        await client.publish(say(chat, "and you?", persona="pirate"))
        error = (await client.next_error()).body
    companion, tool_turn, continued = fake_model.chat_requests()
    assert _system(companion.messages()) == "You are a warm companion."
    assert companion.body["model"] == "fake-model"
    assert "tools" not in companion.body
    assert first["model"] == "fake-model"
    assert _system(tool_turn.messages()) == "You answer questions about orders."
    assert tool_turn.body["model"] == "orders-model"
    assert [t["function"]["name"] for t in tool_turn.body["tools"]] == ["lookup_order"]
    assert call["kind"] == "tool_call"
    assert call["memory"]["recalled_items"] == 0
    # The next message closes the open call and goes on with the conversation's persona.
    assert continued.messages()[-1]["content"] == "and order B2?"
    assert _system(continued.messages()) == "You answer questions about orders."
    assert continued.body["model"] == "orders-model"
    assert later["model"] == "orders-model"
    assert error["code"] == "invalid_event"
    assert "unknown persona 'pirate'" in error["message"]
    assert "orders" not in error["message"]  # an error never lists the personas that exist
