"""Who a gateway request acts for: a tenant, and the one user it may act as (or any user of
the tenant, for a key that is not bound to one)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Caller:
    """The tenant (always from configuration) and, for a user-bound key or a user token,
    the only user id the request may act as."""

    tenant: str
    user: str | None = None
    """None: the key is the tenant's, and the request names its user."""
    identity: str = field(default="", compare=False)
    """Which credential this is, however its header was spelled: ``key:<digest prefix>`` of
    the configured key it matched, or ``user:<tenant>/<user>`` for a signed user token (all
    of a user's tokens are one identity). What per-key request limits count by."""
