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
import re
from dataclasses import dataclass

from llm_bot.config import ID_PATTERN
from llm_bot.gateway.caller import Caller

_ENTRY = re.compile(
    r"^(?P<tenant>[^=/\s]+)(?:/(?P<user>[^=/\s]+))?=sha256:(?P<digest>[0-9a-f]{64})$"
)


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
        entries: list[tuple[Caller, bytes]] = []
        for position, raw in enumerate(text.split(","), start=1):
            item = raw.strip()
            if not item:
                continue
            match = _ENTRY.match(item)
            if match is None:
                raise ValueError(
                    f"entry {position} is not tenant=sha256:<64 lowercase hex digits> or "
                    "tenant/user=sha256:<...> (make one with: llm-bot gateway hash-key)"
                )
            for part in ("tenant", "user"):
                value = match[part]
                if value is not None and re.fullmatch(ID_PATTERN, value) is None:
                    raise ValueError(f"entry {position}: {part} {value!r} is not a valid id")
            caller = Caller(tenant=match["tenant"], user=match["user"])
            entries.append((caller, bytes.fromhex(match["digest"])))
        return cls(tuple(entries))

    def caller_for(self, key: str) -> Caller | None:
        """The caller whose digest matches ``key``, else None (constant time in the key)."""
        presented = hashlib.sha256(key.encode()).digest()
        found: Caller | None = None
        for caller, digest in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = caller
        return found

    def tenant_for(self, key: str) -> str | None:
        """The tenant of ``key``'s caller, else None."""
        caller = self.caller_for(key)
        return None if caller is None else caller.tenant

    def __bool__(self) -> bool:
        return bool(self.entries)
