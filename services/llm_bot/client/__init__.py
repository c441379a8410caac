"""An async Python client of llm-bot: publish events with confirms, ask and get the
CandidateV1, stream the reply's tokens, answer tool calls, import transcripts, forget.

It needs aio-pika and pydantic only (``clients/python``: the ``llm-bot-client``
distribution; docs/contract.md "The Python client")::

    async with Client("amqp://guest:guest@localhost:5672/") as bot:
        reply = await bot.ask("How much is the blue kettle?",
                              tenant="store_001", user="user123", conversation="sess_1")
        print(reply.text)
"""

from llm_bot.client.api import DEFAULT_AMQP_URL, Client
from llm_bot.client.errors import (
    BrokerUnavailable,
    ClientError,
    EventFailed,
    EventInvalid,
    NotDelivered,
    ReplyTimeout,
    StreamDiverged,
)
from llm_bot.contract import CandidateToolCall, CandidateV1, ErrorV1, InternalEventV2

__all__ = [
    "DEFAULT_AMQP_URL",
    "BrokerUnavailable",
    "CandidateToolCall",
    "CandidateV1",
    "Client",
    "ClientError",
    "ErrorV1",
    "EventFailed",
    "EventInvalid",
    "InternalEventV2",
    "NotDelivered",
    "ReplyTimeout",
    "StreamDiverged",
]
