"""Who a gateway request acts for: a tenant, and the one user it may act as (or any user of
the tenant, for a key that is not bound to one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """The tenant (always from configuration) and, for a user-bound key or a user token,
    the only user id the request may act as."""

    tenant: str
    user: str | None = None
    """None: the key is the tenant's, and the request names its user."""
