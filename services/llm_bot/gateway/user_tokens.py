"""Short-lived signed user tokens: a JWT a tenant's own server mints for one of its users,
so a browser widget holds a token that acts as that user only, never a key that can act as
any user of the tenant.

A token is HS256-signed with a secret configured for the tenant
(``LLM_BOT_GATEWAY_TOKEN_SECRETS``: ``tenant=secret`` entries, comma separated, several
per tenant for rotation). Its header's ``kid`` names the tenant whose secrets verify it:
the tenant is the configured one whose secret made the signature, never a claim taken on
the token's word. Claims: ``sub`` (the user id, required), ``exp`` (required, at most
``LLM_BOT_GATEWAY_TOKEN_MAX_TTL_SECONDS`` ahead), ``aud`` and ``iss`` checked when
``LLM_BOT_GATEWAY_TOKEN_AUDIENCE`` / ``LLM_BOT_GATEWAY_TOKEN_ISSUER`` are set. Only HS256
is accepted (no ``none``, no algorithm chosen by the token).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import jwt

from llm_bot.access_lists import parse_token_secrets
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.gateway.caller import Caller

ALGORITHM = "HS256"
LEEWAY_SECONDS = 30
"""Clock skew tolerated between the minting server and the gateway."""


class InvalidUserToken(Exception):
    """A token the gateway does not accept; ``str()`` says why (safe to show the client)."""


def looks_like_token(credential: str) -> bool:
    """A compact JWS (three dot-separated parts), not an API key."""
    return credential.count(".") == 2


@dataclass(frozen=True)
class UserTokens:
    """The tenants' token secrets and the claims every token must satisfy."""

    secrets: tuple[tuple[str, bytes], ...] = ()
    audience: str | None = None
    issuer: str | None = None
    max_ttl_seconds: int = 3600

    @staticmethod
    def parse_secrets(text: str) -> tuple[tuple[str, bytes], ...]:
        """Parse ``tenant=secret,...``; ``ValueError`` naming the entry (never the secret)."""
        return parse_token_secrets(text)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def caller_for(self, token: str) -> Caller:
        """The tenant and user a valid token acts for; ``InvalidUserToken`` otherwise."""
        try:
            tenant = jwt.get_unverified_header(token).get("kid")
        except jwt.InvalidTokenError:
            raise InvalidUserToken("the token is not a JWT") from None
        candidates = [secret for name, secret in self.secrets if name == tenant]
        if not isinstance(tenant, str) or not candidates:
            raise InvalidUserToken("the token's kid names no tenant with a token secret")
        claims = self._verified(token, candidates)
        user = claims["sub"]
        if not isinstance(user, str) or re.fullmatch(ID_PATTERN, user) is None:
            raise InvalidUserToken("the token's sub is not a valid user id")
        if float(claims["exp"]) > time.time() + self.max_ttl_seconds + LEEWAY_SECONDS:
            raise InvalidUserToken(
                f"the token lives longer than {self.max_ttl_seconds} s: mint short-lived ones"
            )
        return Caller(tenant=tenant, user=user, identity=f"user:{tenant}/{user}")

    def _verified(self, token: str, secrets: list[bytes]) -> dict[str, Any]:
        for secret in secrets:
            try:
                return dict(
                    jwt.decode(
                        token,
                        secret,
                        algorithms=[ALGORITHM],
                        audience=self.audience,
                        issuer=self.issuer,
                        leeway=LEEWAY_SECONDS,
                        options={"require": ["exp", "sub"]},
                    )
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.ExpiredSignatureError:
                raise InvalidUserToken("the token has expired") from None
            except jwt.MissingRequiredClaimError as exc:
                raise InvalidUserToken(f"the token has no {exc.claim!r} claim") from None
            except jwt.InvalidAudienceError:
                raise InvalidUserToken("the token's audience is not this gateway") from None
            except jwt.InvalidIssuerError:
                raise InvalidUserToken("the token's issuer is not the configured one") from None
            except jwt.InvalidTokenError:
                raise InvalidUserToken("the token is not valid") from None
        raise InvalidUserToken("the token's signature does not verify")
