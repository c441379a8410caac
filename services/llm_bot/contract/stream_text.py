"""How a reader of CandidateDeltaV1 pieces shows one text (the gateway's SSE stream and
``llm_bot.client``'s ``stream``): what a streaming client is sent, so that it never sees two
different texts.

Deltas are numbered from 0 in each model call. When a call fails midway the service retries
it, and the retry streams again from 0: its text may repeat what the client already has
(then nothing is sent until it goes further), or differ from it (then no more deltas are
sent). The final candidate is the truth: if it continues what the client has, the rest is
sent; if it contradicts it, the stream ends with an error instead of a second text.
A gap in the numbering (a lost delta) also stops the deltas; the final candidate fills in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StreamText:
    """The text sent to one client, and the current model call's text so far."""

    sent: str = ""
    attempt: str = ""
    next_seq: int = 0
    muted: bool = False

    def delta(self, seq: int, piece: str) -> str:
        """What to send the client for delta ``seq`` (possibly nothing)."""
        if seq == 0:
            self.attempt, self.next_seq = "", 0
        if seq != self.next_seq:
            self.muted = True  # a delta was lost: wait for the final candidate
        self.next_seq = seq + 1
        self.attempt += piece
        if self.muted:
            return ""
        if self.attempt.startswith(self.sent):
            new = self.attempt[len(self.sent) :]
            self.sent = self.attempt
            return new
        if not self.sent.startswith(self.attempt):
            self.muted = True  # the retry says something else: only the final text counts
        return ""

    def final(self, text: str) -> str | None:
        """The rest of the final text to send, or None when it contradicts what was sent."""
        if not text.startswith(self.sent):
            return None
        rest = text[len(self.sent) :]
        self.sent = text
        return rest
