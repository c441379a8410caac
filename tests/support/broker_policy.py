"""A RabbitMQ policy set on one test's own queue for the test's duration (``rabbitmqctl
set_policy`` on the broker the tests use, a pattern matching that queue's name only),
cleared at the end, also when the test fails: as an operator bounds queues in production
(``infra/rabbitmq/definitions.json``)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any


def _ctl(*args: str) -> str:
    done = subprocess.run(  # noqa: S603  # a fixed command of this module
        ["rabbitmqctl", *args],  # noqa: S607  # rabbitmqctl from PATH, as the fault tests
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout


@contextlib.contextmanager
def queue_policy(queue: str, definition: dict[str, Any]) -> Iterator[None]:
    """``definition`` applied to ``queue`` until the block ends (waits until it is in
    effect)."""
    name = f"llmbot-test-{uuid.uuid4().hex[:8]}"
    _ctl(
        "set_policy",
        "--apply-to",
        "queues",
        name,
        f"^{re.escape(queue)}$",
        json.dumps(definition),
    )
    try:
        deadline = time.monotonic() + 30
        while name not in _ctl("list_queues", "--quiet", "name", "policy"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"policy {name} did not reach {queue}")
            time.sleep(0.1)
        yield
    finally:
        _ctl("clear_policy", name)
