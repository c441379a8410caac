"""The deliveries one replica admitted to the fair queue and holds unacked in RabbitMQ until
they are answered (SPEC 4: nothing the broker confirmed may be lost to Redis).

Redis only schedules: the broker keeps every waiting event until its candidate (or ErrorV1
and dead letter) is confirmed. What waits outside the broker's keeping is a copy, bounded
per replica by the ingress window (``LLM_BOT_MAX_WAITING``) and per tenant by
``LLM_BOT_TENANT_MAX_WAITING``. A tenant's deliveries past its bound move to its overflow
queue (``rabbit_overflow.py``); held here, unacked and in delivery order, are only those
delivered from the overflow past the tenant's bound and those whose move the broker
refused. When the window is full, RabbitMQ stops delivering and its bounded queue pushes
back.

If Redis loses a waiting copy (a restart without persistence, kill -9, a failover to a
replica that lagged, an eviction), the admitter still holds the delivery and admits it
again, under the same uid, at its next audit (``FairDispatcher``).
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from dataclasses import dataclass

import structlog
from aio_pika.abc import AbstractIncomingMessage

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

RELEASE_CHUNK = 32
"""Held-back deliveries of a tenant are let in once this many fit (an eighth of the bound
at most): one admission round trip lets many in."""


@dataclass(frozen=True)
class Offered:
    """A valid delivery waiting for admission."""

    message: AbstractIncomingMessage
    held: HeldMessage
    key: ConversationKey
    event_id: str = ""
    overflowed: bool = False
    """Delivered from its tenant's overflow queue (moved there at its tenant's bound)."""


@dataclass
class Unanswered:
    """An admitted delivery, unacked until answered."""

    offered: Offered
    settling: bool = False
    """Being completed here: never admitted again by an audit meanwhile."""


class UnansweredDeliveries:
    """This replica's admitted, unanswered deliveries (admission order) and those held back
    at their tenant's bound."""

    def __init__(self, *, tenant_bound: int, metrics: Metrics) -> None:
        self._entries: dict[str, Unanswered] = {}
        self._counts: Counter[str] = Counter()
        self._held_back: dict[str, deque[Offered]] = {}
        self._bound = tenant_bound
        self._metrics = metrics
        self._reported: set[str] = set()
        metrics.waiting_bound.set(tenant_bound)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def holding_back(self) -> bool:
        return bool(self._held_back)

    def at_bound(self, tenant: str, admitting: int = 0, bound: int | None = None) -> bool:
        """Whether a delivery of ``tenant`` must not be admitted now (``admitting``: the
        tenant's deliveries already chosen for the batch being admitted; ``bound``: a
        lower one than the tenant's, for deliveries that would hold the ingress window)."""
        limit = self._bound if bound is None else min(bound, self._bound)
        return bool(self._held_back.get(tenant)) or (self._counts[tenant] + admitting >= limit)

    def hold_back(self, *offered: Offered) -> None:
        for one in offered:
            tenant = one.key.tenant_id
            if not self._held_back.get(tenant):
                log.info("fair.tenant_at_waiting_bound", tenant=tenant, bound=self._bound)
            self._held_back.setdefault(tenant, deque()).append(one)

    def add(self, uid: str, offered: Offered) -> None:
        self._entries[uid] = Unanswered(offered)
        self._counts[offered.key.tenant_id] += 1

    def settling(self, uid: str) -> None:
        entry = self._entries.get(uid)
        if entry is not None:
            entry.settling = True

    async def answered(self, uid: str) -> bool:
        """Ack the delivery behind ``uid`` (answered, here or by another replica); False
        when it is not held here (another's, or already acked)."""
        entry = self._drop(uid)
        if entry is None:
            return False
        with contextlib.suppress(Exception):  # a closed channel: the broker has it back
            await entry.offered.message.ack()
        return True

    @property
    def held_count(self) -> int:
        return sum(len(held) for held in self._held_back.values())

    def take_held_from_ingress(self) -> list[Offered]:
        """The held deliveries of the ingress (not those delivered from an overflow queue,
        which wait for their tenant's room), every tenant's, oldest first: to be moved."""
        out: list[Offered] = []
        for tenant, held in list(self._held_back.items()):
            kept = deque(one for one in held if one.overflowed)
            out += [one for one in held if not one.overflowed]
            if kept:
                self._held_back[tenant] = kept
            else:
                del self._held_back[tenant]
        return out

    def released(self) -> list[Offered]:
        """Held-back deliveries whose tenant has room again, oldest first; a chunk at a
        time (one admission round trip for many), or all the room when the tenant has
        nothing admitted."""
        out: list[Offered] = []
        chunk = max(1, min(RELEASE_CHUNK, self._bound // 8))
        for tenant, held in list(self._held_back.items()):
            room = self._bound - self._counts[tenant]
            if room < chunk and self._counts[tenant] > 0:
                continue
            while held and room > 0:
                out.append(held.popleft())
                room -= 1
            if not held:
                del self._held_back[tenant]
        return out

    def by_conversation(self) -> dict[ConversationKey, list[str]]:
        """The uids to audit, by conversation, in admission order: not being completed
        here, still on a live channel (one whose channel closed is the broker's again:
        it is redelivered, and forgotten here)."""
        for uid in [u for u, e in self._entries.items() if channel_closed(e.offered.message)]:
            self._drop(uid)
        waiting: dict[ConversationKey, list[str]] = {}
        for uid, entry in self._entries.items():
            if not entry.settling:
                waiting.setdefault(entry.offered.key, []).append(uid)
        return waiting

    def still_unanswered(self, uids: list[str]) -> list[tuple[str, Offered]]:
        """Of ``uids``, those still held and not being completed, in admission order."""
        wanted = set(uids)
        return [
            (uid, entry.offered)
            for uid, entry in self._entries.items()
            if uid in wanted and not entry.settling
        ]

    def give_back(self) -> list[Offered]:
        """Shutdown: the held-back deliveries (to be nacked back to the queue)."""
        held = [offered for queue in self._held_back.values() for offered in queue]
        self._held_back.clear()
        return held

    def report(self) -> None:
        """``llmbot_waiting_events`` by tenant: admitted and unanswered, plus held back."""
        counts = Counter(self._counts)
        for tenant, held in self._held_back.items():
            counts[tenant] += len(held)
        for tenant in self._reported - set(counts):
            with contextlib.suppress(KeyError):
                self._metrics.waiting_events.remove(tenant)
        for tenant, count in counts.items():
            self._metrics.waiting_events.labels(tenant).set(count)
        self._reported = set(counts)

    def _drop(self, uid: str) -> Unanswered | None:
        entry = self._entries.pop(uid, None)
        if entry is not None:
            tenant = entry.offered.key.tenant_id
            self._counts[tenant] -= 1
            if self._counts[tenant] <= 0:
                del self._counts[tenant]
        return entry


def channel_closed(message: AbstractIncomingMessage) -> bool:
    channel = getattr(message, "channel", None)
    return bool(getattr(channel, "is_closed", False))
