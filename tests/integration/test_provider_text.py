"""Provider text stays inside (issue 44, item 2), end to end: a provider fails inside its
stream with an error event whose text holds a secret and a traceback. The client, the
integrator (ErrorV1 on the bus), the dead letter's headers and every log line the service
and the gateway write (captured as the service renders them) are checked for it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import openai
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer, Fault
from tests.support.events import new_id
from tests.support.gateway import gateway_settings, running_gateway, sdk_client
from tests.support.harness import bot
from tests.support.logs import rendered_logs

pytestmark = pytest.mark.integration

SECRET = "sk-provider-9f8e7d6c5b4a39281706"
PROVIDER_TEXT = (
    f"upstream key {SECRET} rejected. Traceback (most recent call last): "
    'File "/srv/provider/worker.py", line 12, in generate'
)


async def test_a_secret_in_a_providers_stream_error_reaches_no_error_dead_letter_or_log(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    settings = gateway_settings(make_settings, max_attempts=3, retry_base_seconds=0.05)
    fake_model.script(*[Fault.stream_error(PROVIDER_TEXT)] * 3)
    with rendered_logs() as logs:
        async with bot(settings) as (_, integrator), running_gateway(settings) as gateway:
            client = sdk_client(gateway)
            with pytest.raises(openai.APIStatusError) as failed:
                await client.chat.completions.create(
                    model="llm-bot",
                    messages=[{"role": "user", "content": "hello"}],
                    user="u1",
                    metadata={"conversation_id": new_id("c")},
                    stream=True,
                )
            await client.close()
            error = await integrator.next_error()
            [dead] = await integrator.dead_letters(1)
    assert len(fake_model.requests) == 3  # the stream error was retried, then terminal
    assert failed.value.status_code == 502
    assert error.body["code"] == "model_error"
    assert error.body["message"] == "model stream failed"
    assert dead.headers["x-error-message"] == "model stream failed"
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    events = [line["event"] for line in lines]
    assert events.count("event.retrying") == 2
    assert "event.failed" in events
    assert "gateway.request_failed" in events
    digest = hashlib.sha256(PROVIDER_TEXT.encode()).hexdigest()[:12]
    [failed_line] = [line for line in lines if line["event"] == "event.failed"]
    assert f"sha256:{digest}" in failed_line["detail"]  # the operator can match it up
    for text in (
        json.dumps(error.body),
        json.dumps({k: str(v) for k, v in dead.headers.items()}),
        json.dumps(failed.value.body),
        logs.getvalue(),
    ):
        assert SECRET not in text
        assert "/srv/provider" not in text
