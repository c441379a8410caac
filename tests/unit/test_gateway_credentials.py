"""The gateway's credentials: user-bound API keys, signed user tokens and the personas a
tenant may name, parsed from configuration and checked without a network."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest

from llm_bot.cli import main
from llm_bot.config import ConfigurationError, load_settings
from llm_bot.gateway.api_keys import ApiKeys, key_digest
from llm_bot.gateway.caller import Caller
from llm_bot.gateway.credentials import Credentials
from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.tenant_personas import TenantPersonas
from llm_bot.gateway.user_tokens import InvalidUserToken, UserTokens

SECRET = "shop-1-secret-0123456789abcdef0123456789"
OTHER_SECRET = "not-the-secret-0123456789abcdef012345"
SHORT_SECRETS = "shop_1=tooshort-secret"


def _tokens(**options: Any) -> UserTokens:
    return UserTokens(secrets=UserTokens.parse_secrets(f"shop_1={SECRET}"), **options)


def _token(claims: dict[str, Any], *, kid: str = "shop_1", secret: str = SECRET) -> str:
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": kid})


def _valid(**claims: Any) -> dict[str, Any]:
    return {"sub": "alice", "exp": int(time.time()) + 300, **claims}


def test_keys_may_be_the_tenants_or_bound_to_one_user() -> None:
    """``tenant=`` acts for any user (the old format, unchanged); ``tenant/user=`` for one."""
    keys = ApiKeys.parse(f"shop_1={key_digest('k1')},shop_1/alice={key_digest('k2')}")
    assert keys.caller_for("k1") == Caller("shop_1")
    assert keys.caller_for("k2") == Caller("shop_1", "alice")
    assert keys.tenant_for("k2") == "shop_1"
    assert keys.caller_for("k3") is None


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (f"shop_1/={key_digest('k')}", "entry 1 is not"),
        (f"shop_1/a/b={key_digest('k')}", "entry 1 is not"),
        (f"shop_1/-x={key_digest('k')}", "user '-x' is not a valid id"),
    ],
)
def test_bad_user_bound_entries_name_the_entry(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        ApiKeys.parse(text)


def test_a_valid_token_is_its_sub_in_the_tenant_its_kid_names() -> None:
    assert _tokens().caller_for(_token(_valid())) == Caller("shop_1", "alice")
    audience = _tokens(audience="gw", issuer="shop-1-backend")
    token = _token(_valid(aud="gw", iss="shop-1-backend"))
    assert audience.caller_for(token) == Caller("shop_1", "alice")


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (lambda: _token(_valid(exp=int(time.time()) - 120)), "expired"),
        (lambda: _token(_valid(), secret=OTHER_SECRET), "signature"),
        (lambda: _token(_valid(), kid="shop_2"), "kid"),
        (lambda: _token({"sub": "alice"}), "'exp'"),
        (lambda: _token({"exp": int(time.time()) + 60}), "'sub'"),
        (lambda: _token(_valid(sub="has spaces")), "sub"),
        (lambda: _token(_valid(exp=int(time.time()) + 86_400)), "lives longer"),
        (
            lambda: jwt.encode(_valid(), key=None, algorithm="none", headers={"kid": "shop_1"}),
            "valid",
        ),
        (lambda: "not.a.jwt", "not a JWT"),
    ],
    ids=[
        "expired",
        "other-secret",
        "unknown-kid",
        "no-exp",
        "no-sub",
        "bad-sub",
        "lives-too-long",
        "alg-none",
        "not-a-jwt",
    ],
)
def test_invalid_tokens_say_why(token: Callable[[], str], reason: str) -> None:
    """Each token made when its test runs: its times are then, not at collection (make test
    runs the unit tests minutes after collecting them)."""
    with pytest.raises(InvalidUserToken, match=reason):
        _tokens().caller_for(token())


def test_audience_and_issuer_are_checked_when_configured() -> None:
    checked = _tokens(audience="gw", issuer="shop-1-backend")
    with pytest.raises(InvalidUserToken, match="audience"):
        checked.caller_for(_token(_valid(aud="other", iss="shop-1-backend")))
    with pytest.raises(InvalidUserToken, match="issuer"):
        checked.caller_for(_token(_valid(aud="gw", iss="someone-else")))


def test_credentials_take_keys_first_then_tokens_and_refuse_with_401() -> None:
    credentials = Credentials(keys=ApiKeys.parse(f"shop_1={key_digest('k1')}"), tokens=_tokens())
    assert credentials.caller("Bearer k1") == Caller("shop_1")
    assert credentials.caller(f"Bearer {_token(_valid())}") == Caller("shop_1", "alice")
    for header in ("", "Basic k1", "Bearer nope", f"Bearer {_token(_valid(), kid='x')}"):
        with pytest.raises(WireError) as refused:
            credentials.caller(header)
        assert (refused.value.status, refused.value.code) == (401, "invalid_api_key")


def test_token_secret_errors_never_show_the_secret() -> None:
    with pytest.raises(ValueError, match="at least 32"):
        UserTokens.parse_secrets("shop_1=short")
    with pytest.raises(ConfigurationError, match="LLM_BOT_GATEWAY_TOKEN_SECRETS") as bad:
        load_settings(gateway_token_secrets=SHORT_SECRETS)
    assert "tooshort" not in str(bad.value)


def test_tenant_personas_restrict_listed_tenants_only() -> None:
    personas = TenantPersonas.parse("shop_1=companion|orders, shop_2=default")
    assert personas.permits("shop_1", "orders")
    assert not personas.permits("shop_1", "checkin")
    assert personas.permits("shop_1", None)  # naming none: the conversation's or default
    assert personas.permits("shop_3", "anything")  # not listed: any persona
    for text in ("shop_1", "shop_1=bad name", "shop_1=a,shop_1=b"):
        with pytest.raises(ValueError, match="entry"):
            TenantPersonas.parse(text)
    with pytest.raises(ConfigurationError, match="LLM_BOT_GATEWAY_TENANT_PERSONAS"):
        load_settings(gateway_tenant_personas="shop_1")


def test_hash_key_prints_a_user_bound_entry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``llm-bot gateway hash-key --user`` prints the ``tenant/user=sha256:...`` entry."""
    monkeypatch.setattr("sys.stdin", io.StringIO("sk-widget-key\n"))
    assert main(["gateway", "hash-key", "--tenant", "shop_1", "--user", "alice"]) == 0
    entry = capsys.readouterr().out.strip()
    assert ApiKeys.parse(entry).caller_for("sk-widget-key") == Caller("shop_1", "alice")
    assert main(["gateway", "hash-key", "--tenant", "shop_1", "--user", "bad user"]) == 2


KEYS = ApiKeys.parse(f"shop_1={key_digest('sk-shop-1-key')},shop_1/ann={key_digest('k-ann')}")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_scheme_is_case_insensitive_and_the_identity_is_the_keys(scheme: str) -> None:
    """However the scheme is spelled, the caller's identity (what per-key limits count) is
    the configured key's, and never holds the key itself."""
    caller = Credentials(keys=KEYS).caller(f"{scheme} sk-shop-1-key")
    assert caller == Caller("shop_1")
    assert caller.identity == Credentials(keys=KEYS).caller("Bearer sk-shop-1-key").identity
    assert caller.identity.startswith("key:")
    assert "sk-shop-1-key" not in caller.identity
    assert caller.identity != Credentials(keys=KEYS).caller("Bearer k-ann").identity


@pytest.mark.parametrize(
    ("header", "complaint"),
    [
        ("", "missing API key"),
        ("Bearer  sk-shop-1-key", "malformed Authorization header"),
        ("Bearer\tsk-shop-1-key", "malformed Authorization header"),
        ("Bearer sk-shop-1-key ", "malformed Authorization header"),
        (" Bearer sk-shop-1-key", "malformed Authorization header"),
        ("Bearer sk-shop-1-key, Bearer x", "malformed Authorization header"),
        ("Bearer", "malformed Authorization header"),
        ("Basic c2stc2hvcC0xLWtleQ==", "unsupported authorization scheme"),
    ],
)
def test_a_header_spelled_outside_rfc_6750_is_a_401_saying_so(header: str, complaint: str) -> None:
    with pytest.raises(WireError) as refused:
        Credentials(keys=KEYS).caller(header)
    assert refused.value.status == 401
    assert refused.value.code == "invalid_api_key"
    assert complaint in refused.value.message


def test_every_token_of_a_user_is_one_identity() -> None:
    tokens = _tokens()
    first = tokens.caller_for(_token(_valid()))
    second = tokens.caller_for(_token(_valid(exp=int(time.time()) + 200)))
    assert first.identity == second.identity == "user:shop_1/alice"
