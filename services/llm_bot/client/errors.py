"""What the client raises: the event was refused, not delivered, failed, or not answered in
time. ``EventInvalid`` (a bad event, refused before publishing) is the contract's own."""

from __future__ import annotations

from llm_bot.contract import CandidateV1, ErrorV1
from llm_bot.contract.validation import EventInvalid


class ClientError(Exception):
    """Any failure of an llm-bot client call but a bad event (``EventInvalid``)."""


class BrokerUnavailable(ClientError):
    """RabbitMQ is unreachable, or did not confirm the publish in time."""


class NotDelivered(ClientError):
    """The broker refused the event (the ingress queue is full) or could not route it (no
    queue is bound to the ingress routing key: llm-bot never ran on this broker)."""


class ReplyTimeout(ClientError, TimeoutError):
    """No reply within the call's timeout."""


class EventFailed(ClientError):
    """The service gave up on the event: ``error`` is its ErrorV1 (``code``, ``message``)."""

    def __init__(self, error: ErrorV1) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class StreamDiverged(ClientError):
    """A retried model call said something else than the pieces already yielded: the
    final ``candidate`` is the reply (show its text instead)."""

    def __init__(self, candidate: CandidateV1) -> None:
        super().__init__("the reply changed after a retried model call; use candidate.text")
        self.candidate = candidate


__all__ = [
    "BrokerUnavailable",
    "ClientError",
    "EventFailed",
    "EventInvalid",
    "NotDelivered",
    "ReplyTimeout",
    "StreamDiverged",
]
