"""``llm-bot dlq list|replay``: inspect a dead-letter queue and move messages back.

``--queue events`` (the default) is the service's DLQ (``LLM_BOT_DLQ``), replayed to the
ingress routing key; ``--queue memory`` is the memory worker's (``LLM_BOT_MEMORY_DLQ``),
replayed to the memory-jobs routing key. ``list`` is non-destructive (every message stays
in the DLQ, in order); ``replay`` republishes messages to the exchange and removes them
from the DLQ once the broker confirmed the publish. Bodies are never printed: they are
user content.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator

from aio_pika.abc import AbstractConnection

from llm_bot.adapters import amqp_text
from llm_bot.adapters.rabbit_connection import connect_amqp
from llm_bot.adapters.rabbit_dlq import (
    DeadLetter,
    DlqNotFound,
    RabbitDlq,
    ReplayFailed,
    ReplayResult,
)
from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.config import BrokerConfig

ERROR_TEXT_LIMIT = 200
QUEUES = ("events", "memory")


def topology_of(broker: BrokerConfig, queue: str) -> Topology:
    """The topology whose ``dlq`` and ingress routing key are those of ``queue``."""
    topology = Topology.from_settings(broker)
    return topology.for_memory_worker() if queue == "memory" else topology


async def _connect(broker: BrokerConfig) -> AbstractConnection:
    amqp_text.install()  # dead letters include deliveries pamqp alone cannot decode
    return await connect_amqp(broker.url.get_secret_value())


async def list_dead_letters(
    broker: BrokerConfig, *, limit: int, queue: str = "events"
) -> tuple[list[DeadLetter], int]:
    """Up to ``limit`` dead letters from the head of the DLQ and the DLQ depth."""
    connection = await _connect(broker)
    try:
        dlq = RabbitDlq(connection=connection, topology=topology_of(broker, queue))
        depth = await dlq.depth()
        return await dlq.list_dead_letters(limit), depth
    finally:
        await connection.close()


async def replay_dead_letters(
    broker: BrokerConfig, *, limit: int | None, code: str | None, queue: str = "events"
) -> ReplayResult:
    connection = await _connect(broker)
    try:
        dlq = RabbitDlq(connection=connection, topology=topology_of(broker, queue))
        return await dlq.replay(limit=limit, code=code)
    finally:
        await connection.close()


def _safe(value: object, limit: int = ERROR_TEXT_LIMIT) -> str:
    """One printable token: control characters (terminal escapes, newlines) become ``?``."""
    if value is None:
        return "-"
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_line(letter: DeadLetter) -> str:
    first = letter.first_death.isoformat() if letter.first_death else None
    error = json.dumps(_safe(letter.error_message), ensure_ascii=False)
    return (
        f"#{letter.position} code={_safe(letter.code)} attempts={_safe(letter.attempts)} "
        f"size={letter.body_size} message_id={_safe(letter.message_id)} "
        f"correlation_id={_safe(letter.correlation_id)} tenant_id={_safe(letter.tenant_id)} "
        f"event_id={_safe(letter.event_id)} first_death={_safe(first)} error={error}"
    )


def render_list(
    letters: list[DeadLetter], *, depth: int, queue: str, as_json: bool
) -> Iterator[str]:
    """One line per dead letter (a JSON object each with ``as_json``), then a summary line
    in text mode."""
    for letter in letters:
        yield json.dumps(letter.as_dict()) if as_json else render_line(letter)
    if not as_json:
        yield f"{len(letters)} of {depth} dead letters shown from {queue} (nothing removed)"


def render_replay(result: ReplayResult, *, limit: int | None, code: str | None) -> str:
    """``replayed 3, left 2 (code != model_error)``."""
    reasons = []
    if code is not None and result.skipped:
        reasons.append(f"code != {code}")
    if limit is not None and result.replayed >= limit and result.left:
        reasons.append(f"--limit {limit}")
    why = f" ({'; '.join(reasons)})" if reasons and result.left else ""
    return f"replayed {result.replayed}, left {result.left}{why}"


def run_list(broker: BrokerConfig, *, limit: int, as_json: bool, queue: str = "events") -> int:
    """``llm-bot dlq list``; exit code 2 when the DLQ does not exist."""
    try:
        letters, depth = asyncio.run(list_dead_letters(broker, limit=limit, queue=queue))
    except DlqNotFound as exc:
        print(f"llm-bot: {exc}", file=sys.stderr)
        return 2
    name = topology_of(broker, queue).dlq
    for line in render_list(letters, depth=depth, queue=name, as_json=as_json):
        print(line)
    return 0


def run_replay(
    broker: BrokerConfig, *, limit: int | None, code: str | None, queue: str = "events"
) -> int:
    """``llm-bot dlq replay``; exit code 2 for a missing queue or exchange, 1 when a
    republish failed (that message and the rest stay in the DLQ)."""
    try:
        result = asyncio.run(replay_dead_letters(broker, limit=limit, code=code, queue=queue))
    except DlqNotFound as exc:
        print(f"llm-bot: {exc}", file=sys.stderr)
        return 2
    except ReplayFailed as exc:
        print(f"llm-bot: {exc}", file=sys.stderr)
        return 1
    print(render_replay(result, limit=limit, code=code))
    return 0
