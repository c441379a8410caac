"""Fair dispatch: deliveries leave RabbitMQ at once, and each replica takes work from the
fair queue in Redis by tenant share and conversation turn (SPEC 4 "Fairness").

- **Admission** (one loop, in delivery order): a valid delivery is stored at the end of its
  conversation in Redis, one round trip per batch, and stays unacked in RabbitMQ until it
  is answered (``unanswered.py``: the broker remains the record, Redis schedules; a tenant
  past its bound has its further deliveries held, and once the window is three quarters
  full those past a quarter of it move to its overflow queue,
  ``rabbit_overflow.py``, from which they come back as it has room). When it is the
  conversation's first, a slot is free and its tenant is under its share, it is taken at
  once (the fast path: no more round trips than the lease it replaces). Otherwise the
  conversation is ready (or already queued behind its holder) and the delivery holds
  nothing: no prefetch slot, no lease, no retry count.
- **Dispatch** (one loop): while a slot is free, the next tenant by
  :class:`~llm_bot.service.fairness.TenantShares` gives its oldest ready conversation,
  whose head delivery is processed under the conversation's lease. On completion the
  conversation goes to the back of its tenant's turn if more wait, and on one Redis
  server the next take rides in the completion's round trip (one per event, not three).
- **Recovery** (one loop): conversations whose taker died are made ready again once its
  lease lapses; the head delivery was never removed, so nothing is lost. The same loop
  audits this replica's unanswered deliveries: one Redis lost is admitted again (same uid)
  from the delivery RabbitMQ still holds, and a conversation left with deliveries but
  nothing to hand it over (no holder, not ready, not watched) is made ready and counted.
- **Acks** (one loop): deliveries admitted here and completed by another replica are acked
  when that replica's completion notice is read (completed here: acked at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from aio_pika.abc import AbstractIncomingMessage

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.redis_fair_queue import Admitted, Hand, RedisFairQueue, Taken
from llm_bot.delivery.overflow_moves import MoveToOverflow, OverflowMoves
from llm_bot.delivery.settlements import ParkedSettlement, Settlement
from llm_bot.delivery.unanswered import Offered, UnansweredDeliveries, channel_closed
from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import ConversationLease
from llm_bot.service.fairness import TenantShares
from llm_bot.service.handler import earlier_deliveries
from llm_bot.service.outcomes import DeadLetter, Outcome
from llm_bot.service.parsing import readable_ids
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

ADMIT_BATCH = 256
DIRECT = ""
"""The slot holder of work processed where it was delivered (no tenant id: "" is none)."""
POLL_SECONDS = 0.05
"""How soon a replica with a free slot sees work another replica made ready."""
ADMIT_RETRY_SECONDS = 1.0
"""Pause before a batch Redis refused goes back to RabbitMQ (requeued, not lost)."""
ACKS_POLL_SECONDS = 0.1
"""How often a replica reads the completions other replicas made of its deliveries, while
it saw one in the last ``ACKS_BUSY_SECONDS`` (else every ``ACKS_IDLE_POLL_SECONDS``: a
lone replica completes its own, and a read costs a round trip)."""
ACKS_IDLE_POLL_SECONDS = 1.0
ACKS_BUSY_SECONDS = 10.0
WINDOW_SHARE = 4
"""With an overflow and the window three quarters full, a tenant's admitted deliveries hold
a quarter of the ingress window at most: beyond it, its further ones move to its overflow
queue, so a flood leaves room for the moves in flight and the other tenants."""
_T = TypeVar("_T")
_WAKE = object()
"""Put in the admission inbox to make the loop look at deliveries released from a bound."""


@dataclass(frozen=True)
class Fairness:
    """What fair dispatch needs (SPEC 4 "Fairness")."""

    queue: RedisFairQueue
    lease: ConversationLease
    shares: TenantShares
    max_body_bytes: int
    max_takes: int
    """A delivery taken this often without finishing (its takers died) is dead-lettered."""
    recover_every: float
    max_waiting: int = 2048
    """The ingress window (prefetch): deliveries held unacked by the replica at most."""
    tenant_max_waiting: int = 1024
    """Deliveries of one tenant admitted and unanswered on the replica at most."""
    overflow: MoveToOverflow | None = None
    """Where a tenant's deliveries beyond its bound go (None: they are held here, in the
    ingress window, until the tenant has room)."""


StillOurs = Callable[[], Awaitable[bool]]
ProcessHeld = Callable[[HeldMessage, Settlement, str, Outcome | None, StillOurs], Awaitable[None]]
"""The consumer's processing of a taken delivery under its lease token (a verdict skips
the handler; ``StillOurs`` is asked before each retry)."""
DeadLetterCopy = Callable[[HeldMessage], Awaitable[None]]


class FairDispatcher:
    """Admission, dispatch and recovery loops of one replica."""

    def __init__(
        self,
        *,
        fairness: Fairness,
        process: ProcessHeld,
        dead_letter: DeadLetterCopy,
        metrics: Metrics,
    ) -> None:
        self._queue = fairness.queue
        self._lease = fairness.lease
        self._shares = fairness.shares
        self._process = process
        self._dead_letter = dead_letter
        self._metrics = metrics
        self._max_takes = fairness.max_takes
        self._recover_every = fairness.recover_every
        self._inbox: asyncio.Queue[Offered | object] = asyncio.Queue()
        self._offers = 0
        self._suspect: set[str] = set()
        """Uids Redis did not have at the last audit."""
        """Deliveries in the inbox (not the wake-ups also put there)."""
        self._wake_queued = False
        self._ledger = UnansweredDeliveries(
            tenant_bound=fairness.tenant_max_waiting, metrics=metrics
        )
        self._overflow = fairness.overflow
        self._moves = OverflowMoves(fairness.overflow, metrics) if fairness.overflow else None
        self._window_bound = max(1, fairness.max_waiting // WINDOW_SHARE)
        self._pressure = max(1, fairness.max_waiting * 3 // 4)
        self._wake = asyncio.Event()
        self._waiting: set[str] = set()
        self._refreshed = 0.0
        self._held_back: set[str] = set()
        self._freed: set[str] = set()
        """Uids of taken deliveries whose slot was given back at their completion."""
        self._loops: list[asyncio.Task[None]] = []
        self._runs: set[asyncio.Task[None]] = set()
        self._context = contextvars.copy_context()
        """What every run starts from: the loops' context, not that of a run whose
        completion spawned the next (its log fields and trace stay its own)."""
        self._stopping = False

    @property
    def in_flight(self) -> int:
        return len(self._runs) + self._offers

    @property
    def unanswered(self) -> UnansweredDeliveries:
        return self._ledger

    def start(self) -> None:
        self._context = contextvars.copy_context()
        self._loops = [
            asyncio.create_task(self._admission_loop(), name="fair-admission"),
            asyncio.create_task(self._dispatch_loop(), name="fair-dispatch"),
            asyncio.create_task(self._recovery_loop(), name="fair-recovery"),
            asyncio.create_task(self._acks_loop(), name="fair-acks"),
        ]

    def offer(
        self,
        message: AbstractIncomingMessage,
        held: HeldMessage,
        key: ConversationKey,
        *,
        event_id: str = "",
        overflowed: bool = False,
    ) -> None:
        """Queue a valid delivery for admission (in delivery order); ``overflowed``: it
        comes from its tenant's overflow queue."""
        self._offers += 1
        self._inbox.put_nowait(Offered(message, held, key, event_id, overflowed))

    async def stop_taking(self, *, give_back: bool = True) -> set[asyncio.Task[None]]:
        """No more admitting or taking; what was not admitted goes back to RabbitMQ (now
        with ``give_back``, else when the caller closes the connection: a single active
        consumer's deliveries must go back all at once, in order). Returns the events
        running now: the caller gives them the grace period (one that is cancelled gives
        its conversation back to the queue, head first)."""
        self._stopping = True
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        waiting = [o for o in _drain(self._inbox) if isinstance(o, Offered)]
        held_back = self._ledger.give_back()
        if not give_back:
            return set(self._runs)
        for offered in [*held_back, *waiting]:
            with contextlib.suppress(Exception):
                await offered.message.nack(requeue=True)
        return set(self._runs)

    async def _admission_loop(self) -> None:
        while True:
            arrived = [await self._inbox.get()]
            while len(arrived) < ADMIT_BATCH and not self._inbox.empty():
                arrived.append(self._inbox.get_nowait())
            self._wake_queued = False
            self._offers -= sum(1 for o in arrived if isinstance(o, Offered))
            released = self._ledger.released()  # older than any of their tenant's arrivals
            batch = self._within_bounds([o for o in arrived if isinstance(o, Offered)], released)
            # One whose channel closed is the broker's again: redelivered (to the partition's
            # next active consumer, maybe), admitted from there, in order; admitted from
            # here too, it could land ahead of that partition's earlier deliveries.
            batch = [(o, hand) for o, hand in batch if not channel_closed(o.message)]
            if not batch:
                continue
            try:
                await self._admit(batch)
                self._wake.set()
                if self._pressed() and self._ledger.holding_back and self._inbox.empty():
                    self._inbox.put_nowait(_WAKE)  # the window fills: move the held now
            except asyncio.CancelledError:
                for offered, _ in batch:
                    with contextlib.suppress(Exception):
                        await offered.message.nack(requeue=True)
                raise
            except Exception as exc:  # noqa: BLE001  # Redis refused: back to RabbitMQ, not lost
                log.warning("fair.admission_failed", **log_fields(exc), count=len(batch))
                await asyncio.sleep(ADMIT_RETRY_SECONDS)
                for offered, _ in batch:
                    with contextlib.suppress(Exception):
                        await offered.message.nack(requeue=True)

    def _within_bounds(
        self, offered: list[Offered], released: list[Offered]
    ) -> list[tuple[Offered, Hand]]:
        """Of the deliveries arrived, those to hand to the queue now (after ``released``,
        which were held back and have room again), each with how. A tenant's deliveries
        past a quarter of the ingress window, once it is three quarters full (with an
        overflow), move to its overflow queue, those held first; below that, past its bound
        they are held; those delivered from there, past the tenant's bound, wait here (in
        delivery order: once one waits, its tenant's later ones wait behind it)."""
        batch: list[tuple[Offered, Hand]] = []
        admitting: dict[str, int] = {}
        for one in released:
            admitting[one.key.tenant_id] = admitting.get(one.key.tenant_id, 0) + 1
            batch.append((one, Hand.BACK if one.overflowed else Hand.IN_ORDER))
        pressed = self._pressed()
        if pressed:  # the held ones first, ahead of their tenants' newer ones
            batch += [(one, Hand.OVERFLOW) for one in self._ledger.take_held_from_ingress()]
        for one in offered:
            tenant = one.key.tenant_id
            chosen = admitting.get(tenant, 0)
            if self._overflow is not None and not one.overflowed:
                if pressed and self._ledger.at_bound(tenant, chosen, self._window_bound):
                    batch.append((one, Hand.OVERFLOW))
                    continue
                if not pressed and self._ledger.at_bound(tenant, chosen):
                    self._ledger.hold_back(one)
                    continue
            elif self._ledger.at_bound(tenant, chosen):
                self._ledger.hold_back(one)
                continue
            admitting[tenant] = chosen + 1
            batch.append((one, Hand.BACK if one.overflowed else Hand.IN_ORDER))
        return batch

    def _pressed(self) -> bool:
        """Whether the ingress window is three quarters full (with an overflow): then a
        tenant's deliveries past a quarter of it move to its overflow queue, the held ones
        first; below, a tenant holds up to its bound and nothing moves."""
        used = len(self._ledger) + self._ledger.held_count
        return self._overflow is not None and used >= self._pressure

    async def _admit(self, batch: list[tuple[Offered, Hand]]) -> None:
        tokens = [
            None if hand is Hand.OVERFLOW else self._reserve(o.key.tenant_id) for o, hand in batch
        ]
        try:
            admitted = await self._queue.admit(
                [(o.key, o.held, t) for (o, _), t in zip(batch, tokens, strict=True)],
                hands=[(hand, o.event_id) for o, hand in batch],
            )
        except BaseException:
            for (offered, _), token in zip(batch, tokens, strict=True):
                if token is not None:
                    self._shares.finish(offered.key.tenant_id)
            raise
        ready: list[ConversationKey] = []
        moved: list[Offered] = []
        for (offered, _), token, (uid, what) in zip(batch, tokens, admitted, strict=True):
            if what is Admitted.TAKEN and token is not None:
                self._spawn(Taken(offered.key, uid, offered.held, token, 1))
                continue
            if token is not None:
                self._shares.finish(offered.key.tenant_id)
            if what is Admitted.MOVED:
                moved.append(offered)
            elif self._waits(offered.key, what):
                ready.append(offered.key)
        for (offered, _), (uid, what) in zip(batch, admitted, strict=True):
            if what is not Admitted.MOVED:
                self._ledger.add(uid, offered)  # unacked until answered
        if ready:  # if this fails, recovery readies them from the watch
            await self._queue.make_ready(*ready)
            self._waiting.update(key.tenant_id for key in ready)
            self._wake.set()
        if moved:
            await self._to_overflow(moved)

    async def _to_overflow(self, moved: list[Offered]) -> None:
        """Deliveries the queue did not admit, moved before the next batch is admitted
        (admission first: the replica takes no work meanwhile, so the flood's read ahead of
        a quiet tenant's events ends sooner); with no overflow here (their conversation's
        ids were noted by a replica with one), held back instead."""
        if self._moves is not None:
            await self._moves.move(moved)
        else:
            self._ledger.hold_back(*moved)

    def _waits(self, key: ConversationKey, what: Admitted) -> bool:
        """Count why an admitted delivery waits; True when its conversation is to be made
        ready (it is the first of its conversation)."""
        reason = "conversation_busy"
        if what is Admitted.READY:
            under = self._shares.under_share(key.tenant_id)
            reason = "no_slot" if under else "tenant_over_share"
        self._metrics.fair_waited.labels(reason).inc()
        return what is Admitted.READY

    def _reserve(self, tenant: str) -> str | None:
        """A token to take the conversation at once with, and a slot reserved for it, when
        there is a free slot and the tenant is under its share; else None."""
        if self._shares.free > 0 and self._shares.under_share(tenant):
            self._shares.start(tenant)
            return self._queue.new_token()
        return None

    async def _dispatch_loop(self) -> None:
        while not self._stopping:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow the cancellation
            # that stops this loop when the event is set at the same moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_SECONDS):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._fill()
            except LlmBotError as exc:
                log.warning("fair.dispatch_failed", **log_fields(exc))
                await asyncio.sleep(POLL_SECONDS)
            except Exception:  # the loop must outlive any one failure
                log.exception("fair.dispatch_failed")
                await asyncio.sleep(POLL_SECONDS)

    async def _fill(self) -> None:
        moves_refused = self._moves is not None and self._moves.retrying
        if self._shares.free <= 0 or (self._offers and not moves_refused):
            return  # admission first: what waits behind a backlog reaches Redis sooner
        now = time.monotonic()
        if now - self._refreshed >= POLL_SECONDS:
            self._waiting = await self._queue.ready_tenants()
            self._refreshed = now
        held_back = self._shares.held_back(self._waiting)
        self._metrics.fair_held_back.set(len(held_back))
        if held_back != self._held_back:
            if held_back - self._held_back:
                log.info("fair.tenants_held_back", tenants=sorted(held_back))
            self._held_back = held_back
        while not self._stopping:
            tenant = self._shares.next_tenant(self._waiting)
            if tenant is None:
                return
            self._shares.start(tenant)
            try:
                taken = await self._queue.take(tenant)
            except BaseException:
                self._shares.finish(tenant)
                raise
            if isinstance(taken, Taken):
                self._spawn(taken)
                continue
            self._shares.finish(tenant)
            self._waiting.discard(tenant)  # none due now; the next refresh brings it back

    async def in_a_slot(self, work: Awaitable[None]) -> None:
        """Work processed where it was delivered (an event the queue does not take: no
        readable conversation, or a ``memory.forget`` of every conversation) holds a slot
        while it runs, so the replica's slots bound everything it processes at once."""
        self._shares.start(DIRECT)
        try:
            await work
        finally:
            self._shares.finish(DIRECT)
            self._wake.set()

    def _spawn(self, taken: Taken) -> None:
        task = asyncio.create_task(self._run(taken), context=self._context.copy())
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _run(self, taken: Taken) -> None:
        settlement: ParkedSettlement | None = None
        try:
            self._metrics.fair_dwell.observe(max(0.0, time.time() - taken.message.published_at()))
            message = retaken(taken)
            settlement = ParkedSettlement(
                queue=self._queue,
                taken=taken,
                dead_letter=lambda: self._dead_letter(message),
                complete=self._complete,
            )
            async with self._lease.renewed(taken.key, taken.token):
                await self._process(
                    message,
                    settlement,
                    taken.token,
                    self._verdict(taken),
                    lambda: self._queue.retake(taken),
                )
        except Exception:  # the lease lapses and recovery retakes the head: nothing is lost
            log.exception("fair.run_failed")
        finally:
            if taken.uid in self._freed:
                self._freed.discard(taken.uid)
            else:
                self._shares.finish(taken.key.tenant_id)
            if settlement is not None and settlement.remaining:  # ready again
                self._waiting.add(taken.key.tenant_id)
            self._wake.set()

    async def _complete(self, taken: Taken) -> int:
        """Complete a taken delivery (its settlement's last step: its outcome is out) and
        ack it in RabbitMQ, here when admitted here (else its admitter is told in the same
        round trip), even if Redis failed: the event is answered."""
        self._ledger.settling(taken.uid)
        try:
            return await self._complete_in_queue(taken)
        finally:
            await self._answered(taken.uid)

    async def _answered(self, uid: str) -> None:
        if await self._ledger.answered(uid) and self._ledger.holding_back and not self._wake_queued:
            self._wake_queued = True
            self._inbox.put_nowait(_WAKE)  # its tenant may have room again

    async def _complete_in_queue(self, taken: Taken) -> int:
        """On one server, with
        nothing waiting for admission, its slot is given back now and the take
        :meth:`_fill` would make next rides in the completion's round trip, with the look
        at the tenants when one is due (it then serves the next choice: a tenant another
        replica made ready is seen one completion later at most)."""
        if self._stopping or not self._queue.takes_with_completion or self._offers:
            return await self._queue.complete(taken)
        finished = taken.key.tenant_id
        self._shares.finish(finished)
        self._freed.add(taken.uid)
        if taken.behind > 0:  # its conversation is ready again with the completion
            self._waiting.add(finished)
        now = time.monotonic()
        look = now - self._refreshed >= POLL_SECONDS
        tenant = self._shares.next_tenant(self._waiting)
        if tenant is not None:
            self._shares.start(tenant)
        try:
            done = await self._queue.complete_and_take(taken, tenant, look=look)
        except BaseException:
            if tenant is not None:
                self._shares.finish(tenant)
            raise
        if done.tenants is not None:
            self._waiting, self._refreshed = done.tenants, now
        if isinstance(done.taken, Taken):
            self._spawn(done.taken)
        elif tenant is not None:
            self._shares.finish(tenant)
            self._waiting.discard(tenant)  # none due now; the next look brings it back
        return done.remaining

    def _verdict(self, taken: Taken) -> Outcome | None:
        """A dead letter for a delivery taken too often (its takers died): a poison bound."""
        if taken.times_taken <= self._max_takes:
            return None
        body = taken.message.body
        return DeadLetter(
            code="internal",
            message=f"taken {taken.times_taken - 1} times without finishing",
            attempts=taken.times_taken - 1,
            ids=readable_ids(body, max_bytes=len(body)),
        )

    async def _recovery_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._recover_every)
            try:
                recovered = await self._queue.recover()
                await self.audit()
            except Exception:  # the loop must outlive any one failure
                log.warning("fair.recovery_failed", exc_info=True)
                continue
            if recovered:  # a dead admitter's or taker's, or ready ones looked at again
                log.info("fair.readied_from_watch", conversations=recovered)
                self._wake.set()
            with contextlib.suppress(LlmBotError):
                self._metrics.fair_ready.set(await self._queue.ready_count())

    async def audit(self) -> None:
        """This replica's unanswered deliveries against Redis: those it lost (missing at
        two audits in a row) are admitted again under their uids, in admission order (the
        broker still holds them); a conversation with deliveries that nothing would hand
        over is made ready."""
        self._ledger.report()
        waiting = self._ledger.by_conversation()
        if not waiting:
            return
        found = await self._queue.audit(waiting)
        await self._read_completions()  # completed elsewhere meanwhile: not lost
        if found.orphans:
            self._metrics.fair_orphans.inc(found.orphans)
            log.warning("fair.unwatched_conversations_repaired", conversations=found.orphans)
        # Missing at two audits in a row: a completion on another replica whose notice was
        # not read yet is missing once, never twice (the notice is read within a second).
        missing = self._ledger.still_unanswered(found.missing)
        lost = [(uid, offered) for uid, offered in missing if uid in self._suspect]
        self._suspect = {uid for uid, _ in missing} - {uid for uid, _ in lost}
        if not lost:
            return
        admitted = await self._queue.admit(
            [(o.key, o.held, None) for _, o in lost],
            uids=[uid for uid, _ in lost],
            hands=[(Hand.BACK, o.event_id) for _, o in lost],
        )
        ready = [
            o.key
            for (_, o), (_, what) in zip(lost, admitted, strict=True)
            if what is Admitted.READY
        ]
        if ready:
            await self._queue.make_ready(*ready)
            self._waiting.update(key.tenant_id for key in ready)
            self._wake.set()
        self._metrics.fair_readmitted.inc(len(lost))
        log.warning("fair.readmitted_lost_deliveries", count=len(lost))

    async def _acks_loop(self) -> None:
        last_seen = -ACKS_BUSY_SECONDS
        while not self._stopping:
            busy = time.monotonic() - last_seen < ACKS_BUSY_SECONDS
            await asyncio.sleep(ACKS_POLL_SECONDS if busy else ACKS_IDLE_POLL_SECONDS)
            if len(self._ledger) == 0:
                continue
            try:
                if await self._read_completions():
                    last_seen = time.monotonic()
            except LlmBotError as exc:
                log.warning("fair.completions_unread", **log_fields(exc))
            except Exception:  # the loop must outlive any one failure
                log.exception("fair.completions_unread")

    async def _read_completions(self) -> int:
        """Ack what other replicas completed; returns how many they did."""
        done = await self._queue.completions()
        for uid in done:
            await self._answered(uid)
        return len(done)


def retaken(taken: Taken) -> HeldMessage:
    """The delivery as its handler sees it: taken before means delivered before (its
    attempts count on, as the broker's ``x-delivery-count`` would)."""
    if taken.times_taken <= 1:
        return taken.message
    held = taken.message
    earlier = earlier_deliveries(held.headers) + taken.times_taken - 1
    headers = {**held.headers, "x-delivery-count": earlier}
    return dataclasses.replace(held, headers=headers, redelivered=True)


def _drain(queue: asyncio.Queue[_T]) -> list[_T]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items
