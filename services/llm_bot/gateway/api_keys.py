"""API keys → callers, from ``LLM_BOT_GATEWAY_KEYS``.

Only SHA-256 digests of the keys are configured, comma separated: ``tenant=sha256:<64 hex
digits>`` for a key that acts for any user of the tenant (a server's key), and
``tenant/user=sha256:<64 hex digits>`` for a key bound to one user (a request naming another
user is refused). A tenant may have several, for rotation. API keys are long random
secrets, so a fast hash is the usual store (a slow password hash protects guessable
secrets, and would put milliseconds of CPU on every request). A presented key is hashed and
compared with every configured digest in constant time (``hmac.compare_digest``, no early
exit), so the time a request takes tells nothing about which digest came close.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace

from llm_bot.access_lists import parse_key_entries
from llm_bot.gateway.caller import Caller


def key_digest(key: str) -> str:
    """``sha256:<hex>`` of a key: the form ``LLM_BOT_GATEWAY_KEYS`` stores."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKeys:
    """The configured digests, each with the caller it stands for."""

    entries: tuple[tuple[Caller, bytes], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ApiKeys:
        """Parse ``tenant[/user]=sha256:<hex>,...``; ``ValueError`` naming the bad entry."""
        return cls(
            tuple(
                (Caller(tenant=tenant, user=user), digest)
                for tenant, user, digest in parse_key_entries(text)
            )
        )

    def caller_for(self, key: str) -> Caller | None:
        """The caller whose digest matches ``key``, else None (constant time in the key)."""
        presented = hashlib.sha256(key.encode()).digest()
        found: Caller | None = None
        for caller, digest in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = replace(caller, identity=f"key:{digest.hex()[:24]}")
        return found

    def tenant_for(self, key: str) -> str | None:
        """The tenant of ``key``'s caller, else None."""
        caller = self.caller_for(key)
        return None if caller is None else caller.tenant

    def __bool__(self) -> bool:
        return bool(self.entries)
