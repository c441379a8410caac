"""``Authorization: Bearer <credential>`` → the caller: an API key (``LLM_BOT_GATEWAY_KEYS``,
the tenant's or bound to one user) or a signed user token (``LLM_BOT_GATEWAY_TOKEN_SECRETS``).
Every failure is 401 ``invalid_api_key`` with ``WWW-Authenticate: Bearer``."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_bot.gateway.api_keys import ApiKeys
from llm_bot.gateway.caller import Caller
from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.user_tokens import InvalidUserToken, UserTokens, looks_like_token


@dataclass(frozen=True)
class Credentials:
    """What the gateway accepts as a bearer credential."""

    keys: ApiKeys
    tokens: UserTokens = field(default_factory=UserTokens)

    def caller(self, authorization: str) -> Caller:
        """The caller of an ``Authorization`` header's value; ``WireError`` (401) else."""
        scheme, _, credential = authorization.partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise WireError(
                401,
                "missing API key: send 'Authorization: Bearer <key or user token>'",
                code="invalid_api_key",
            )
        caller = self.keys.caller_for(credential)
        if caller is not None:
            return caller
        if self.tokens and looks_like_token(credential):
            try:
                return self.tokens.caller_for(credential)
            except InvalidUserToken as exc:
                raise WireError(401, f"invalid user token: {exc}", code="invalid_api_key") from None
        raise WireError(401, "incorrect API key provided", code="invalid_api_key")
