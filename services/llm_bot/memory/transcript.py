"""Turns of an imported transcript (SPEC 3 ``transcript``), numbered like live turns.

Each user message starts a new turn; an assistant message joins the current turn, and one
that comes before any turn of the conversation opens a turn of its own. Message ids derive
from the event id and the position, so re-appending the same event changes nothing.

An imported message's text is kept as written but for its invisible characters
(:func:`~llm_bot.memory.stored_text.strip_invisible`: zero-width, bidi and other format or
control characters): a transcript is history handed over by an integrator, and the
conversation's own window sends its last turns to the model as stored, where a bidi
override could reorder what the model reads, and hide text from an operator reading it.
The memory message strips the same characters from everything it quotes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.stored_text import strip_invisible


class SpokenMessage(Protocol):
    """What a transcript message carries (``contract.TranscriptMessage``)."""

    @property
    def role(self) -> Literal["user", "assistant"]: ...

    @property
    def text(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def created_at(self) -> datetime | None: ...


def transcript_turns(
    event_id: str,
    messages: Sequence[SpokenMessage],
    *,
    last_turn: int,
    next_seq: int,
    created_at: datetime,
) -> list[ChatMessage]:
    """The imported messages numbered after the conversation's ``last_turn``; ``next_seq``
    is the next sequence number free in that turn (for assistant messages that join it)."""
    turn, seq = last_turn, next_seq
    numbered: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if message.role == "user" or turn == 0:
            turn, seq = turn + 1, 0
        numbered.append(
            ChatMessage(
                id=f"{event_id}:{index}",
                role=message.role,
                content=strip_invisible(message.text),
                created_at=(message.created_at or created_at).isoformat(),
                turn=turn,
                seq=seq,
                event_id=event_id,
                name=message.name,
            )
        )
        seq += 1
    return numbered
