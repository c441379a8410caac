"""Who goes next on a replica: tenant shares and weights (SPEC 4 "Fairness"). Pure.

A replica has ``slots`` (events processed at once). A tenant's share is
``max_in_flight * weight`` slots; it may take more only while no other tenant has work
waiting or running on the replica (work-conserving when alone; while another tenant is
active, the flood keeps to its share, so the other's events neither wait for a slot nor
compete for the CPU with a whole replica of the flood). The next slot goes to the waiting
tenant with the least work in flight per unit of weight (weighted fair queueing over
in-flight work, as Temporal's fairness keys and SQS fair queues do it), ties to the one
served longest ago.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field


@dataclass
class TenantShares:
    """In-flight work per tenant on one replica, and who may take the next slot."""

    slots: int
    max_in_flight: int
    weights: Mapping[str, float] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    _served: dict[str, int] = field(default_factory=dict)
    _clock: int = 0

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, 1.0)

    def share(self, tenant: str) -> int:
        """Slots the tenant may hold while others wait (at least one)."""
        return max(1, min(self.slots, round(self.max_in_flight * self.weight(tenant))))

    @property
    def in_flight(self) -> int:
        return sum(self.running.values())

    @property
    def free(self) -> int:
        return self.slots - self.in_flight

    def under_share(self, tenant: str) -> bool:
        return self.running.get(tenant, 0) < self.share(tenant)

    def held_back(self, waiting: Collection[str]) -> set[str]:
        """The waiting tenants that may not take a slot now (at their share while another
        tenant is active)."""
        return {t for t in waiting if not self._eligible(t, waiting)}

    def next_tenant(self, waiting: Collection[str]) -> str | None:
        """Who gets a free slot among ``waiting`` tenants; None when no slot is free or
        every waiting tenant is held at its share."""
        if self.free <= 0:
            return None
        eligible = [t for t in waiting if self._eligible(t, waiting)]
        return min(eligible, key=self._order) if eligible else None

    def _eligible(self, tenant: str, waiting: Collection[str]) -> bool:
        if self.under_share(tenant):
            return True
        return all(t == tenant for t in waiting) and all(t == tenant for t in self.running)

    def start(self, tenant: str) -> None:
        self.running[tenant] = self.running.get(tenant, 0) + 1
        self._clock += 1
        self._served[tenant] = self._clock

    def finish(self, tenant: str) -> None:
        left = self.running.get(tenant, 0) - 1
        if left > 0:
            self.running[tenant] = left
        else:
            self.running.pop(tenant, None)

    def _order(self, tenant: str) -> tuple[float, int]:
        load = self.running.get(tenant, 0) / self.weight(tenant)
        return (load, self._served.get(tenant, 0))
