"""Protocol-level poison: AMQP properties and headers no UTF-8 decoder or ``datetime`` takes.

Publishing these needs ``llm_bot.adapters.amqp_text.install()`` in the publishing process:
its encoders turn the surrogate escapes below back into the raw bytes 0xFF 0xFE.
"""

from __future__ import annotations

from typing import Any

from llm_bot.adapters.amqp_text import UnrepresentableTimestamp

BAD = "\udcff\udcfe"  # bytes 0xFF 0xFE on the wire: never UTF-8
FAR_FUTURE = UnrepresentableTimestamp.of(2**64 - 1)

POISONS: dict[str, tuple[dict[str, Any], str]] = {
    "message_id": ({"message_id": f"evt{BAD}"}, "property message-id is not valid UTF-8"),
    "correlation_id": ({"correlation_id": BAD}, "property correlation-id is not valid UTF-8"),
    "type": ({"type": BAD}, "property type is not valid UTF-8"),
    "app_id": ({"app_id": BAD}, "property app-id is not valid UTF-8"),
    "timestamp": ({"timestamp": FAR_FUTURE}, "property timestamp is a timestamp out of range"),
    "header name": ({"headers": {f"x-{BAD}": 1}}, "a header name is not valid UTF-8"),
    "nested header name": (
        {"headers": {"x-meta": {BAD: "v"}}},
        "header x-meta holds a name that is not valid UTF-8",
    ),
    "traceparent": ({"headers": {"traceparent": b"\xff\xfe"}}, "header traceparent is not UTF-8"),
    "header timestamp": (
        {"headers": {"x-sent": FAR_FUTURE}},
        "header x-sent is a timestamp out of range",
    ),
}
"""Kind → (publish keyword arguments for ``Integrator.publish``, start of the error)."""
