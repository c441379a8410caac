"""``LLM_BOT_TENANT_WEIGHTS``'s form: read by the settings' validator and the fairness group."""

from __future__ import annotations

import math


def parse_tenant_weights(text: str) -> dict[str, float]:
    """``LLM_BOT_TENANT_WEIGHTS``: ``tenant=weight`` pairs separated by commas
    (``gold=2,trial=0.5``); a tenant not named has weight 1. ``ValueError`` says what is
    wrong."""
    weights: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        tenant, sep, value = part.partition("=")
        tenant = tenant.strip()
        if not sep or not tenant:
            raise ValueError(f"{part!r} is not tenant=weight")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"weight of {tenant!r} is not a number: {value.strip()!r}") from None
        if not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"weight of {tenant!r} must be a positive number")
        if tenant in weights:
            raise ValueError(f"tenant {tenant!r} is named twice")
        weights[tenant] = weight
    return weights
