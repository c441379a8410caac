"""Keys that cannot impersonate (issue 26, 3): a key bound to one user acts as that user
only, a signed user token acts as its ``sub`` only, and a tenant names only the personas it
is allowed; refusals are OpenAI-style and list nothing that exists."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jwt
import openai
import pytest

from llm_bot.config import Settings
from llm_bot.fake_model import FakeModelServer
from llm_bot.gateway.api_keys import key_digest
from llm_bot.memory.conversation_key import ConversationKey
from tests.support.events import new_id
from tests.support.gateway import gateway_keys, gateway_settings, running_gateway, sdk_client
from tests.support.harness import bot

pytestmark = pytest.mark.integration

USER_KEY = "sk-test-bound-to-alice-0123456789"
SECRET = "tenant-a-widget-secret-0123456789abcdef"
OTHER_SECRET = "someone-else-s-secret-0123456789abcdef"
AUDIENCE = "llm-bot-gateway"


def _settings(make_settings: Callable[..., Settings], **overrides: Any) -> Settings:
    return gateway_settings(
        make_settings,
        gateway_keys=f"{gateway_keys()},tenant_a/alice={key_digest(USER_KEY)}",
        gateway_token_secrets=f"tenant_a={SECRET}",
        gateway_token_audience=AUDIENCE,
        **overrides,
    )


def _token(
    sub: str = "alice",
    *,
    lifetime: float = 300,
    secret: str = SECRET,
    kid: str = "tenant_a",
    aud: str = AUDIENCE,
) -> str:
    claims = {"sub": sub, "exp": int(time.time() + lifetime), "aud": aud}
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": kid})


def _ask(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "model": "llm-bot",
        "messages": [{"role": "user", "content": text}],
        "metadata": {"conversation_id": new_id("c"), **fields.pop("metadata", {})},
        **fields,
    }


async def test_a_user_bound_key_acts_as_its_user_only(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """With a key bound to alice, a request naming no user is alice's; naming alice works;
    naming bob (in ``user`` or ``X-User-Id``) is 403 ``user_not_allowed`` and reaches no
    model."""
    settings = _settings(make_settings)
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway, api_key=USER_KEY)
        served = await client.chat.completions.create(**_ask("hi"))
        assert served.choices[0].message.content == "echo: hi"
        again = await client.chat.completions.create(**_ask("me", user="alice"))
        assert again.choices[0].message.content == "echo: me"
        requests_before = len(fake_model.chat_requests())
        with pytest.raises(openai.PermissionDeniedError) as as_bob:
            await client.chat.completions.create(**_ask("as bob", user="bob"))
        assert as_bob.value.code == "user_not_allowed"
        with pytest.raises(openai.PermissionDeniedError) as by_header:
            await client.chat.completions.create(
                **_ask("as bob", user="alice"), extra_headers={"X-User-Id": "bob"}
            )
        assert by_header.value.code == "user_not_allowed"
        assert len(fake_model.chat_requests()) == requests_before
        await client.close()


async def test_a_user_token_acts_as_its_sub_only_and_bad_tokens_are_401(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """A valid token is its ``sub`` (alice) of the tenant its ``kid`` names and whose secret
    signed it (the turn is in alice's memory); a request naming bob is 403; an expired
    token, a bad signature, another tenant's ``kid``, a wrong audience and a token living
    past the maximum are 401."""
    settings = _settings(make_settings, gateway_token_max_ttl_seconds=600)
    async with bot(settings) as (service, _), running_gateway(settings) as gateway:
        client = sdk_client(gateway, api_key=_token())
        conversation = new_id("c")
        served = await client.chat.completions.create(
            **_ask("hello", metadata={"conversation_id": conversation})
        )
        assert served.choices[0].message.content == "echo: hello"
        key = ConversationKey("tenant_a", "alice", conversation)
        memory = await service.store.load(key, "probe")
        assert [m.content for m in memory.memory.messages] == ["hello", "echo: hello"]
        requests_before = len(fake_model.chat_requests())
        with pytest.raises(openai.PermissionDeniedError) as as_bob:
            await client.chat.completions.create(**_ask("as bob", user="bob"))
        assert as_bob.value.code == "user_not_allowed"
        await client.close()
        refused = {
            "expired": _token(lifetime=-120),
            "signature": _token(secret=OTHER_SECRET),
            "kid": _token(kid="tenant_b"),
            "audience": _token(aud="another-service"),
            "lives longer": _token(lifetime=3600),
        }
        for reason, token in refused.items():
            bad = sdk_client(gateway, api_key=token)
            with pytest.raises(openai.AuthenticationError) as denied:
                await bad.chat.completions.create(**_ask("hi", user="alice"))
            assert denied.value.code == "invalid_api_key", reason
            assert reason in denied.value.message, denied.value.message
            await bad.close()
        assert len(fake_model.chat_requests()) == requests_before


async def test_a_tenant_names_only_its_allowed_personas(
    make_settings: Callable[..., Settings], fake_model: FakeModelServer
) -> None:
    """tenant_a may name only ``default``: another persona (existing or not) is 403
    ``persona_not_allowed`` and the error lists nothing; tenant_b, not listed, may name
    any."""
    settings = _settings(make_settings, gateway_tenant_personas="tenant_a=default")
    async with bot(settings), running_gateway(settings) as gateway:
        client = sdk_client(gateway)
        allowed = await client.chat.completions.create(
            **_ask("hi", user="u1", metadata={"persona": "default"})
        )
        assert allowed.choices[0].message.content == "echo: hi"
        with pytest.raises(openai.PermissionDeniedError) as refused:
            await client.chat.completions.create(
                **_ask("hi", user="u1", metadata={"persona": "pirate"})
            )
        assert refused.value.code == "persona_not_allowed"
        assert "default" not in refused.value.message  # never what exists or is allowed
        await client.close()
        other = sdk_client(gateway, tenant="tenant_b")
        with pytest.raises(openai.BadRequestError) as unknown:
            await other.chat.completions.create(
                **_ask("hi", user="u1", metadata={"persona": "pirate"})
            )
        assert unknown.value.code == "invalid_event"  # the service's: pirate is no persona
        assert "default" not in unknown.value.message
        await other.close()
