"""Inspector keys → scopes, from ``LLM_BOT_INSPECTOR_KEYS``.

Entries ``scope=sha256:<64 hex digits>``, comma separated, in the gateway's format: the
scope is a tenant id (the key reads and acts in that tenant only) or ``*`` (every tenant).
Only digests are configured; a presented key is hashed and compared with every digest in
constant time (``hmac.compare_digest``, no early exit).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from llm_bot.contract.identifiers import ID_PATTERN

ALL_TENANTS = "*"
_ENTRY = re.compile(r"^(?P<scope>[^=\s]+)=sha256:(?P<digest>[0-9a-f]{64})$")


def key_digest(key: str) -> str:
    """``sha256:<hex>`` of a key: the form ``LLM_BOT_INSPECTOR_KEYS`` stores."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Scope:
    """What one key may see: one tenant, or every tenant (``*``). ``name`` names the key in
    audit events (its scope and the digest's first 8 hex digits, never the key)."""

    tenant: str
    name: str

    def allows(self, tenant_id: str) -> bool:
        return self.tenant in (ALL_TENANTS, tenant_id)


@dataclass(frozen=True)
class InspectorKeys:
    entries: tuple[tuple[Scope, bytes], ...] = ()

    @classmethod
    def parse(cls, text: str) -> InspectorKeys:
        """Parse ``scope=sha256:<hex>,...``; ``ValueError`` naming the bad entry."""
        entries: list[tuple[Scope, bytes]] = []
        for position, raw in enumerate(text.split(","), start=1):
            item = raw.strip()
            if not item:
                continue
            match = _ENTRY.match(item)
            if match is None:
                raise ValueError(
                    f"entry {position} is not scope=sha256:<64 lowercase hex digits> "
                    "(make one with: llm-bot inspect hash-key --tenant T, or --all)"
                )
            scope = match["scope"]
            if scope != ALL_TENANTS and re.fullmatch(ID_PATTERN, scope) is None:
                raise ValueError(f"entry {position}: scope {scope!r} is not a tenant id or *")
            name = f"{scope}:{match['digest'][:8]}"
            entries.append((Scope(scope, name), bytes.fromhex(match["digest"])))
        return cls(tuple(entries))

    def scope_for(self, key: str) -> Scope | None:
        """The scope whose digest matches ``key``, else None (constant time in the key)."""
        presented = hashlib.sha256(key.encode()).digest()
        found: Scope | None = None
        for scope, digest in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = scope
        return found

    def __bool__(self) -> bool:
        return bool(self.entries)
