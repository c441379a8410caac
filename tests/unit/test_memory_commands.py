"""A memory job decodes into its typed command once (``service/memory_commands.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

from llm_bot.contract import MemoryJobV1
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.service.memory_commands import FinalizeConversation, FormTurn, memory_command

KEY = ConversationKey("t1", "u1", "c1")


def job(kind: str, **fields: object) -> MemoryJobV1:
    return MemoryJobV1.model_validate(
        {
            "id": f"{kind}_1",
            "kind": kind,
            "tenant_id": KEY.tenant_id,
            "user_id": KEY.user_id,
            "conversation_id": KEY.conversation_id,
            "turn": 4,
            "created_at": datetime(2026, 11, 28, tzinfo=UTC).isoformat(),
            **fields,
        }
    )


def test_a_turn_job_is_a_form_turn_command_with_its_turn_and_tokens() -> None:
    command = memory_command(job("turn", prompt_tokens=900))
    assert command == FormTurn(job_id="turn_1", key=KEY, turn=4, prompt_tokens=900)
    assert command.kind == "turn"


def test_a_finalize_job_is_a_finalize_command() -> None:
    command = memory_command(job("finalize"))
    assert command == FinalizeConversation(job_id="finalize_1", key=KEY)
    assert command.kind == "finalize"
