"""A delivery the service holds on to after the broker let it go: what dead-lettering and
processing need of the original message, and its byte form in Redis (the fair queue).

The fair queue stores a delivery in Redis (``redis_fair_queue.py``) and any replica may
process it, so everything a later step reads of the message (body, headers, the properties a dead-letter
copy keeps, ``reply_to``) is stored with it and read back unchanged. Header values that JSON
cannot hold (bytes, timestamps, decimals) travel tagged and come back as the same types.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from aio_pika.abc import AbstractIncomingMessage

MOVED_ROUTING_KEY = "x-llmbot-routing-key"
"""Header of a delivery's copy in an overflow queue: the routing key it was published with."""
MOVED_RECEIVED_AT = "x-llmbot-received-at"
"""Header of a delivery's copy in an overflow queue: when the service first received it."""


class MessageLike(Protocol):
    """The properties a dead-letter copy keeps (an incoming message has them too)."""

    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, Any] | None: ...
    @property
    def content_type(self) -> str | None: ...
    @property
    def content_encoding(self) -> str | None: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def correlation_id(self) -> str | None: ...
    @property
    def timestamp(self) -> datetime | None: ...
    @property
    def type(self) -> str | None: ...
    @property
    def app_id(self) -> str | None: ...
    @property
    def routing_key(self) -> str | None: ...


@dataclass(frozen=True)
class HeldMessage:
    """A message as it was delivered, independent of the channel it came on."""

    body: bytes
    headers: Mapping[str, Any] = field(default_factory=dict)
    content_type: str | None = None
    content_encoding: str | None = None
    message_id: str | None = None
    correlation_id: str | None = None
    timestamp: datetime | None = None
    type: str | None = None
    app_id: str | None = None
    routing_key: str | None = None
    reply_to: str | None = None
    redelivered: bool = False
    received_at: float = 0.0
    """Epoch seconds when this service first received it (dwell time when the publisher
    set no ``timestamp``)."""

    @classmethod
    def of(cls, message: AbstractIncomingMessage, *, received_at: float) -> HeldMessage:
        """The delivery as it was published: a copy moved to an overflow queue comes back
        with its original routing key and when it was first received (its headers say)."""
        headers = dict(message.headers or {})
        routing_key = message.routing_key
        moved_from = headers.pop(MOVED_ROUTING_KEY, None)
        first_received = headers.pop(MOVED_RECEIVED_AT, None)
        if isinstance(moved_from, str | bytes):
            routing_key = moved_from.decode() if isinstance(moved_from, bytes) else moved_from
        if isinstance(first_received, int | float | str | bytes):
            with contextlib.suppress(ValueError):
                received_at = min(received_at, float(first_received))
        return cls(
            body=message.body,
            headers=headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            message_id=message.message_id,
            correlation_id=message.correlation_id,
            timestamp=message.timestamp,
            type=message.type,
            app_id=message.app_id,
            routing_key=routing_key,
            reply_to=message.reply_to,
            redelivered=bool(message.redelivered),
            received_at=received_at,
        )

    def published_at(self) -> float:
        """When it was published: the ``timestamp`` property, else when it was received."""
        if self.timestamp is not None:
            try:
                stamp = self.timestamp.timestamp()
            except (OverflowError, ValueError, OSError):
                return self.received_at
            if 0 < stamp <= self.received_at:
                return stamp
        return self.received_at


_PROPERTIES = (
    "content_type",
    "content_encoding",
    "message_id",
    "correlation_id",
    "type",
    "app_id",
    "routing_key",
    "reply_to",
)


def encode_held(uid: str, held: HeldMessage) -> bytes:
    """``uid`` + newline + JSON of everything but the body + newline + the body."""
    meta: dict[str, Any] = {name: getattr(held, name) for name in _PROPERTIES}
    meta["headers"] = _tagged(dict(held.headers))
    meta["timestamp"] = held.timestamp.timestamp() if held.timestamp is not None else None
    meta["redelivered"] = held.redelivered
    meta["received_at"] = held.received_at
    return b"\n".join((uid.encode("ascii"), json.dumps(meta).encode("utf-8"), held.body))


def decode_held(data: bytes, *, redelivered: bool = False) -> tuple[str, HeldMessage]:
    """The uid and message of :func:`encode_held`'s bytes (``redelivered`` ORed in)."""
    uid, meta_json, body = data.split(b"\n", 2)
    meta = json.loads(meta_json)
    stamp = meta.pop("timestamp")
    return uid.decode("ascii"), HeldMessage(
        body=body,
        headers=_untagged(meta.pop("headers")),
        timestamp=datetime.fromtimestamp(stamp, UTC) if stamp is not None else None,
        redelivered=bool(meta.pop("redelivered")) or redelivered,
        **meta,
    )


def _tagged(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$t": value.timestamp()}
    if isinstance(value, Decimal):
        return {"$d": str(value)}
    if isinstance(value, Mapping):
        return {"$m": {str(k): _tagged(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return [_tagged(v) for v in value]
    return value


_TAGS: dict[str, Any] = {
    "$b": base64.b64decode,
    "$t": lambda stamp: datetime.fromtimestamp(stamp, UTC),
    "$d": Decimal,
    "$m": lambda mapping: {k: _untagged(v) for k, v in mapping.items()},
}


def _untagged(value: Any) -> Any:
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    if isinstance(value, dict):
        for tag, decode in _TAGS.items():
            if tag in value:
                return decode(value[tag])
        return {k: _untagged(v) for k, v in value.items()}
    return value
