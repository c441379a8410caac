"""Which personas each tenant's requests may name (``LLM_BOT_GATEWAY_TENANT_PERSONAS``).

``tenant=persona|persona,...``: a tenant listed may name only those personas in a
request's ``metadata.persona``; a tenant not listed may name any. A request naming none
gets its conversation's persona or the default, as always. A refusal names the persona the
request asked for and nothing else: it never lists which personas exist or are allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from llm_bot.access_lists import parse_tenant_personas


@dataclass(frozen=True)
class TenantPersonas:
    """The allowed personas of the tenants that have a list."""

    allowed: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> TenantPersonas:
        """Parse ``tenant=a|b,...``; ``ValueError`` naming the bad entry."""
        return cls(parse_tenant_personas(text))

    def permits(self, tenant: str, persona: str | None) -> bool:
        """Whether ``tenant``'s request may name ``persona`` (naming none always may)."""
        listed = self.allowed.get(tenant)
        return persona is None or listed is None or persona in listed
