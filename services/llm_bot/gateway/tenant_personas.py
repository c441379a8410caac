"""Which personas each tenant's requests may name (``LLM_BOT_GATEWAY_TENANT_PERSONAS``).

``tenant=persona|persona,...``: a tenant listed may name only those personas in a
request's ``metadata.persona``; a tenant not listed may name any. A request naming none
gets its conversation's persona or the default, as always. A refusal names the persona the
request asked for and nothing else: it never lists which personas exist or are allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from llm_bot.config import ID_PATTERN

_PERSONA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class TenantPersonas:
    """The allowed personas of the tenants that have a list."""

    allowed: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> TenantPersonas:
        """Parse ``tenant=a|b,...``; ``ValueError`` naming the bad entry."""
        allowed: dict[str, frozenset[str]] = {}
        for position, raw in enumerate(text.split(","), start=1):
            item = raw.strip()
            if not item:
                continue
            tenant, sep, names = item.partition("=")
            tenant = tenant.strip()
            if not sep or re.fullmatch(ID_PATTERN, tenant) is None:
                raise ValueError(f"entry {position} is not tenant=persona|persona")
            personas = frozenset(name.strip() for name in names.split("|"))
            bad = sorted(name for name in personas if _PERSONA.fullmatch(name) is None)
            if bad:
                raise ValueError(f"entry {position} ({tenant}): {bad[0]!r} is not a persona name")
            if tenant in allowed:
                raise ValueError(f"entry {position}: tenant {tenant!r} is named twice")
            allowed[tenant] = personas
        return cls(allowed)

    def permits(self, tenant: str, persona: str | None) -> bool:
        """Whether ``tenant``'s request may name ``persona`` (naming none always may)."""
        listed = self.allowed.get(tenant)
        return persona is None or listed is None or persona in listed
