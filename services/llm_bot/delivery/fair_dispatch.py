"""Fair dispatch: deliveries leave RabbitMQ at once, and each replica takes work from the
fair queue in Redis by tenant share and conversation turn (SPEC 4 "Fairness").

- **Admission** (one loop, in delivery order): a valid delivery is stored at the end of its
  conversation in Redis and acked; one round trip per batch. When it is the
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
  lease lapses; the head delivery was never removed, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from aio_pika.abc import AbstractIncomingMessage

from llm_bot.adapters.held_message import HeldMessage
from llm_bot.adapters.redis_fair_queue import Admitted, RedisFairQueue, Taken
from llm_bot.delivery.settlements import ParkedSettlement, Settlement
from llm_bot.errors import LlmBotError, log_fields
from llm_bot.memory.working import ConversationKey
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
ADMISSION_WINDOW = 256
"""RabbitMQ prefetch of the ingress channel with fair dispatch: deliveries are acked as
soon as Redis has them, so a wide window lets a backlog leave the queue in a few round
trips (what a quiet tenant's event waits behind); the processing slots are separate."""
POLL_SECONDS = 0.05
"""How soon a replica with a free slot sees work another replica made ready."""
ADMIT_RETRY_SECONDS = 1.0
"""Pause before a batch Redis refused goes back to RabbitMQ (requeued, not lost)."""


@dataclass(frozen=True)
class Offered:
    """A valid delivery waiting for admission."""

    message: AbstractIncomingMessage
    held: HeldMessage
    key: ConversationKey


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


ProcessHeld = Callable[[HeldMessage, Settlement, str, Outcome | None], Awaitable[None]]
"""The consumer's processing of a taken delivery under its lease token (a verdict skips
the handler)."""
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
        self._inbox: asyncio.Queue[Offered] = asyncio.Queue()
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
        return len(self._runs) + self._inbox.qsize()

    def start(self) -> None:
        self._context = contextvars.copy_context()
        self._loops = [
            asyncio.create_task(self._admission_loop(), name="fair-admission"),
            asyncio.create_task(self._dispatch_loop(), name="fair-dispatch"),
            asyncio.create_task(self._recovery_loop(), name="fair-recovery"),
        ]

    def offer(
        self, message: AbstractIncomingMessage, held: HeldMessage, key: ConversationKey
    ) -> None:
        """Queue a valid delivery for admission (in delivery order)."""
        self._inbox.put_nowait(Offered(message, held, key))

    async def stop_taking(self) -> set[asyncio.Task[None]]:
        """No more admitting or taking; what was not admitted goes back to RabbitMQ.
        Returns the events running now: the caller gives them the grace period (one that
        is cancelled gives its conversation back to the queue, head first)."""
        self._stopping = True
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        while not self._inbox.empty():
            offered = self._inbox.get_nowait()
            with contextlib.suppress(Exception):
                await offered.message.nack(requeue=True)
        return set(self._runs)

    async def _admission_loop(self) -> None:
        while True:
            batch = [await self._inbox.get()]
            while len(batch) < ADMIT_BATCH and not self._inbox.empty():
                batch.append(self._inbox.get_nowait())
            try:
                await self._admit(batch)
                self._wake.set()
            except asyncio.CancelledError:
                for offered in batch:
                    with contextlib.suppress(Exception):
                        await offered.message.nack(requeue=True)
                raise
            except Exception as exc:  # noqa: BLE001  # Redis refused: back to RabbitMQ, not lost
                log.warning("fair.admission_failed", **log_fields(exc), count=len(batch))
                await asyncio.sleep(ADMIT_RETRY_SECONDS)
                for offered in batch:
                    with contextlib.suppress(Exception):
                        await offered.message.nack(requeue=True)

    async def _admit(self, batch: list[Offered]) -> None:
        tokens = [self._reserve(offered.key.tenant_id) for offered in batch]
        try:
            admitted = await self._queue.admit(
                [(o.key, o.held, t) for o, t in zip(batch, tokens, strict=True)]
            )
        except BaseException:
            for offered, token in zip(batch, tokens, strict=True):
                if token is not None:
                    self._shares.finish(offered.key.tenant_id)
            raise
        ready: list[ConversationKey] = []
        for offered, token, (uid, what) in zip(batch, tokens, admitted, strict=True):
            if what is Admitted.TAKEN and token is not None:
                self._spawn(Taken(offered.key, uid, offered.held, token, 1))
                continue
            tenant = offered.key.tenant_id
            if token is not None:
                self._shares.finish(tenant)
            reason = "conversation_busy"
            if what is Admitted.READY:
                reason = "no_slot" if self._shares.under_share(tenant) else "tenant_over_share"
                ready.append(offered.key)
            self._metrics.fair_waited.labels(reason).inc()
        if ready:  # before the acks (if this fails, recovery readies them from the watch)
            await self._queue.make_ready(*ready)
            self._waiting.update(key.tenant_id for key in ready)
            self._wake.set()
        for offered in batch:
            await offered.message.ack()

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
        if self._shares.free <= 0 or not self._inbox.empty():
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
                await self._process(message, settlement, taken.token, self._verdict(taken))
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
        """Complete a taken delivery (its settlement's last step). On one server, with
        nothing waiting for admission, its slot is given back now and the take
        :meth:`_fill` would make next rides in the completion's round trip, with the look
        at the tenants when one is due (it then serves the next choice: a tenant another
        replica made ready is seen one completion later at most)."""
        if self._stopping or not self._queue.takes_with_completion or not self._inbox.empty():
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
            except Exception:  # the loop must outlive any one failure
                log.warning("fair.recovery_failed", exc_info=True)
                continue
            if recovered:  # a dead admitter's or taker's, or ready ones looked at again
                log.info("fair.readied_from_watch", conversations=recovered)
                self._wake.set()
            with contextlib.suppress(LlmBotError):
                self._metrics.fair_ready.set(await self._queue.ready_count())


def retaken(taken: Taken) -> HeldMessage:
    """The delivery as its handler sees it: taken before means delivered before (its
    attempts count on, as the broker's ``x-delivery-count`` would)."""
    if taken.times_taken <= 1:
        return taken.message
    held = taken.message
    earlier = earlier_deliveries(held.headers) + taken.times_taken - 1
    headers = {**held.headers, "x-delivery-count": earlier}
    return dataclasses.replace(held, headers=headers, redelivered=True)
