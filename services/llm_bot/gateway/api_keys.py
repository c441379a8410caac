"""API keys → tenants, from ``LLM_BOT_GATEWAY_KEYS``.

Only SHA-256 digests of the keys are configured (``tenant=sha256:<64 hex digits>``, comma
separated; a tenant may have several, for rotation): API keys are long random secrets, so a
fast hash is the usual store (a slow password hash protects guessable secrets, and would put
milliseconds of CPU on every request). A presented key is hashed and compared with every
configured digest in constant time (``hmac.compare_digest``, no early exit), so the time a
request takes tells nothing about which digest came close.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from llm_bot.config import ID_PATTERN

_ENTRY = re.compile(r"^(?P<tenant>[^=\s]+)=sha256:(?P<digest>[0-9a-f]{64})$")


def key_digest(key: str) -> str:
    """``sha256:<hex>`` of a key: the form ``LLM_BOT_GATEWAY_KEYS`` stores."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKeys:
    """The configured digests, each with its tenant."""

    entries: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ApiKeys:
        """Parse ``tenant=sha256:<hex>,...``; ``ValueError`` naming the bad entry."""
        entries: list[tuple[str, bytes]] = []
        for position, raw in enumerate(text.split(","), start=1):
            item = raw.strip()
            if not item:
                continue
            match = _ENTRY.match(item)
            if match is None:
                raise ValueError(
                    f"entry {position} is not tenant=sha256:<64 lowercase hex digits> "
                    "(make one with: llm-bot gateway hash-key)"
                )
            tenant = match["tenant"]
            if re.fullmatch(ID_PATTERN, tenant) is None:
                raise ValueError(f"entry {position}: tenant {tenant!r} is not a valid id")
            entries.append((tenant, bytes.fromhex(match["digest"])))
        return cls(tuple(entries))

    def tenant_for(self, key: str) -> str | None:
        """The tenant whose digest matches ``key``, else None (constant time in the key)."""
        presented = hashlib.sha256(key.encode()).digest()
        found: str | None = None
        for tenant, digest in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = tenant
        return found

    def __bool__(self) -> bool:
        return bool(self.entries)
