"""``Authorization: Bearer <credential>`` → the caller: an API key (``LLM_BOT_GATEWAY_KEYS``,
the tenant's or bound to one user) or a signed user token (``LLM_BOT_GATEWAY_TOKEN_SECRETS``).
Every failure is 401 ``invalid_api_key`` with ``WWW-Authenticate: Bearer``.

The header is read as RFC 7235 and RFC 6750 write it: the scheme ``Bearer`` in any case,
exactly one space, then the credential (a ``b64token``: letters, digits and ``-._~+/``,
then any ``=``). Anything else (two spaces, a tab, a trailing space, a comma list) is a 401
saying so: a header spelled another way is never a second name for the same key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_bot.gateway.api_keys import ApiKeys
from llm_bot.gateway.caller import Caller
from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.user_tokens import InvalidUserToken, UserTokens, looks_like_token

_CREDENTIALS = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([A-Za-z0-9._~+/-]+=*)")
"""``auth-scheme SP b64token`` (RFC 7235 section 2.1, RFC 6750 section 2.1), one space."""
USAGE = "send 'Authorization: Bearer <key or user token>'"


def bearer_credential(authorization: str) -> str:
    """The credential of an ``Authorization`` value; a 401 ``WireError`` naming what is
    wrong with it otherwise."""
    if not authorization:
        raise WireError(401, f"missing API key: {USAGE}", code="invalid_api_key")
    match = _CREDENTIALS.fullmatch(authorization)
    if match is None:
        raise WireError(
            401,
            f"malformed Authorization header: {USAGE} (one space, no other characters)",
            code="invalid_api_key",
        )
    if match[1].lower() != "bearer":
        raise WireError(401, f"unsupported authorization scheme: {USAGE}", code="invalid_api_key")
    return match[2]


@dataclass(frozen=True)
class Credentials:
    """What the gateway accepts as a bearer credential."""

    keys: ApiKeys
    tokens: UserTokens = field(default_factory=UserTokens)

    def caller(self, authorization: str) -> Caller:
        """The caller of an ``Authorization`` header's value; ``WireError`` (401) else."""
        return self.caller_of(bearer_credential(authorization))

    def caller_of(self, credential: str) -> Caller:
        """The caller a bearer credential stands for; ``WireError`` (401) else."""
        caller = self.keys.caller_for(credential)
        if caller is not None:
            return caller
        if self.tokens and looks_like_token(credential):
            try:
                return self.tokens.caller_for(credential)
            except InvalidUserToken as exc:
                raise WireError(401, f"invalid user token: {exc}", code="invalid_api_key") from None
        raise WireError(401, "incorrect API key provided", code="invalid_api_key")
