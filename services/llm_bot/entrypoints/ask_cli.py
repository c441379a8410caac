"""``llm-bot ask TEXT``: send a message through RabbitMQ with ``llm_bot.client`` and print
the reply (``--stream``: its pieces as they arrive), as the README's first steps use it."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from llm_bot.adapters.rabbit_connection import quiet_connect_errors
from llm_bot.client import Client, ClientError, EventFailed, EventInvalid, ReplyTimeout
from llm_bot.config import BrokerConfig
from llm_bot.contract import CandidateV1


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    tenant: str
    user: str
    conversation: str
    stream: bool = False
    as_json: bool = False
    timeout: float = 120.0


async def run_ask(broker: BrokerConfig, question: Question) -> int:
    """0: the reply was printed; 1: the service gave up on it (its ErrorV1 on stderr), or
    no reply in time; 2: the broker is unreachable, or nothing consumes the events."""
    client = Client(
        broker.url.get_secret_value(),
        exchange=broker.exchange,
        routing_key=broker.ingress_routing_key,
        timeout=question.timeout,
    )
    try:
        with quiet_connect_errors():  # a failed connect is reported below, in one line
            await client.connect()
        try:
            await _ask(client, question)
        finally:
            await client.close()
    except EventInvalid as exc:
        return _fail(f"the event would be refused: {exc}", 2)
    except EventFailed as exc:
        return _fail(f"error {exc.error.code}: {exc.error.message}", 1)
    except ReplyTimeout:
        return _fail(f"no reply within {question.timeout:g} s: is llm-bot running?", 1)
    except ClientError as exc:
        return _fail(f"{exc} (AMQP_URL)", 2)
    return 0


async def _ask(client: Client, question: Question) -> None:
    tenant, user, conversation = question.tenant, question.user, question.conversation
    if question.stream:
        pieces = client.stream(question.text, tenant=tenant, user=user, conversation=conversation)
        async for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
        return
    candidate = await client.ask(question.text, tenant=tenant, user=user, conversation=conversation)
    _print(candidate, as_json=question.as_json)


def _print(candidate: CandidateV1, *, as_json: bool) -> None:
    if as_json:
        print(candidate.model_dump_json(by_alias=True, exclude_none=True))
    elif candidate.kind == "tool_call":
        for call in candidate.tool_calls or ():
            print(f"tool call {call.id}: {call.name}({call.arguments})")
    else:
        print(candidate.text)


def _fail(line: str, code: int) -> int:
    print(f"llm-bot: {line}", file=sys.stderr)
    return code
