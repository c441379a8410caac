"""The streamed reply: first piece at once, later ones gathered per interval, the rest
flushed; numbered from 0; nothing lost or reordered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llm_bot.contract import CandidateDeltaV1, CandidateV1, ErrorV1
from llm_bot.graph.reply_stream import ReplyStream
from llm_bot.memory.conversation_key import ConversationKey

KEY = ConversationKey("t", "u", "c")


class Recorded:
    def __init__(self) -> None:
        self.sent: list[CandidateDeltaV1] = []

    async def send(
        self, reply_to: str, event_id: str, message: CandidateDeltaV1 | CandidateV1 | ErrorV1
    ) -> None:
        assert reply_to == "amq.rabbitmq.reply-to.x"
        assert isinstance(message, CandidateDeltaV1)
        self.sent.append(message)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_first_piece_at_once_then_gathered_per_interval_then_flushed() -> None:
    replies, clock = Recorded(), Clock()
    stream = ReplyStream(
        replies, "amq.rabbitmq.reply-to.x", key=KEY, event_id="e1", interval=0.04, clock=clock
    )
    for at, piece in ((0.0, "Hel"), (0.01, "lo"), (0.03, ", "), (0.05, "wor"), (0.06, "ld")):
        clock.now = at
        await stream(piece)
    assert [d.delta for d in replies.sent] == ["Hel", "lo, wor"]
    await stream.flush()
    await stream.flush()  # nothing left: nothing sent
    assert [(d.seq, d.delta) for d in replies.sent] == [(0, "Hel"), (1, "lo, wor"), (2, "ld")]
    assert {d.candidate_id for d in replies.sent} == {replies.sent[0].candidate_id}
    assert replies.sent[0].candidate_id.startswith("cand_e1.")


@given(st.lists(st.tuples(st.floats(0, 0.1), st.text(min_size=1, max_size=5)), max_size=50))
async def test_any_timing_sends_the_whole_text_in_order(
    pieces: list[tuple[float, str]],
) -> None:
    replies, clock = Recorded(), Clock()
    stream = ReplyStream(
        replies, "amq.rabbitmq.reply-to.x", key=KEY, event_id="e1", interval=0.04, clock=clock
    )
    for gap, piece in pieces:
        clock.now += gap
        await stream(piece)
    await stream.flush()
    assert "".join(d.delta for d in replies.sent) == "".join(p for _, p in pieces)
    assert [d.seq for d in replies.sent] == list(range(len(replies.sent)))
    assert all(d.delta for d in replies.sent)
