"""The memory worker's job handler: delivery in, outcome out (knows nothing of aio-pika).

A ``turn`` job classifies the new user messages and compacts what left the window (or
what token pressure pushes out); a ``finalize`` job compacts everything left and removes
the working memory. Jobs are idempotent (a done-marker per job id, and all work keyed by
the conversation's progress in Redis) and retried like events.

The job's model calls are its tenant's (token budgets). A tenant over its budget has its
job deferred: acked (outcome ``refused``), never dead-lettered, not marked done. The
classifier falls back to its keyword rules (no model call); the turns not compacted stay
pending in the raw trace, so nothing the user said is lost, and the conversation's next
job (its next turn, or its finalization once it is idle again) compacts them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import assert_never

import structlog
from pydantic import ValidationError

from llm_bot.contract import MemoryJobV1
from llm_bot.errors import (
    BudgetExceeded,
    ErasedMeanwhile,
    InvalidEvent,
    RetryableError,
    log_fields,
)
from llm_bot.ports import MemoryProgress
from llm_bot.service.classifier import MessageClassifier
from llm_bot.service.compactor import Compactor
from llm_bot.service.conversation_locks import ConversationLocks
from llm_bot.service.handler import Delivery, first_attempt
from llm_bot.service.indexer import Indexer
from llm_bot.service.memory_commands import (
    FinalizeConversation,
    FormTurn,
    MemoryJobCommand,
    memory_command,
)
from llm_bot.service.outcomes import Duplicate, Outcome, Recorded, Skipped, outcome_for_error
from llm_bot.service.retry import Exhausted, RetryPolicy, with_retries
from llm_bot.service.token_spending import charged_to
from llm_bot.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


class MemoryJobHandler:
    """Runs one memory job to completion, or names its terminal outcome."""

    def __init__(
        self,
        *,
        progress: MemoryProgress,
        classifier: MessageClassifier,
        compactor: Compactor,
        indexer: Indexer | None,
        retry: RetryPolicy,
        compaction_threshold_tokens: int,
        metrics: Metrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._progress = progress
        self._classifier = classifier
        self._compactor = compactor
        self._indexer = indexer
        self._retry = retry
        self._threshold = compaction_threshold_tokens
        self._metrics = metrics
        self._clock = clock
        self._locks = ConversationLocks()

    async def handle(self, delivery: Delivery) -> Outcome:
        attempt = first_attempt(delivery)
        try:
            job = MemoryJobV1.model_validate_json(delivery.body)
        except ValidationError as exc:
            error = InvalidEvent(f"invalid memory job: {exc.error_count()} problems")
            return outcome_for_error(error, ids=None, attempts=attempt)
        structlog.contextvars.bind_contextvars(
            job_id=job.id,
            job_kind=job.kind,
            tenant_id=job.tenant_id,
            conversation_id=job.conversation_id,
        )
        try:
            with charged_to(job.tenant_id):  # every model call below is the tenant's
                result = await with_retries(
                    lambda: self._run(job),
                    policy=self._retry,
                    attempt=attempt,
                    on_retry=self._on_retry,
                )
        except BudgetExceeded as exc:
            log.info("memory_job.deferred", reason=exc.code, period=exc.period)
            return outcome_for_error(exc, ids=None, attempts=attempt)
        except Exception as exc:  # noqa: BLE001  # the one place job errors become outcomes
            log.warning("memory_job.failed", **log_fields(exc))
            return outcome_for_error(exc, ids=None, attempts=attempt)
        if isinstance(result, Exhausted):
            return outcome_for_error(result.error, ids=None, attempts=result.attempts)
        return result

    def _on_retry(self, attempt: int, error: RetryableError, delay: float) -> None:
        log.warning(
            "memory_job.retrying",
            attempt=attempt,
            code=error.code,
            **log_fields(error),
            delay_seconds=round(delay, 3),
        )
        self._metrics.retried()

    async def _run(self, job: MemoryJobV1) -> Outcome:
        if await self._progress.job_done(job.tenant_id, job.user_id, job.id):
            return Duplicate(candidate=None)
        command = memory_command(job)
        async with self._locks.hold(command.key):
            return await self._run_locked(command)

    async def _run_locked(self, command: MemoryJobCommand) -> Outcome:
        key = command.key
        # Read before anything of the user's memory: every write below is refused
        # (ErasedMeanwhile, retried) if the user is erased after this point.
        erasure = await self._progress.erasure(key.tenant_id, key.user_id)
        if not await self._progress.exists(key):
            # Erased (or expired): nothing to read, nothing to write, nothing to sweep.
            await self._progress.forget_activity(key)
            return Skipped("the conversation has no memory (erased or expired)")
        match command:
            case FormTurn(turn=turn, prompt_tokens=tokens):
                await self._progress.touch(key, self._clock().timestamp())
                if await self._progress.erasure(key.tenant_id, key.user_id) != erasure:
                    raise ErasedMeanwhile("the user was erased while the job started")
                pressure = tokens is not None and tokens > self._threshold
                return await self._form(command, erasure, through=turn, pressure=pressure)
            case FinalizeConversation():
                return await self._form(command, erasure, through=None, finalize=True)
            case _:
                assert_never(command)

    async def _form(
        self,
        command: MemoryJobCommand,
        erasure: str,
        *,
        through: int | None,
        pressure: bool = False,
        finalize: bool = False,
    ) -> Outcome:
        """Classify the user messages (``through`` a turn; None: all not classified yet),
        compact, and index; a finalization compacts everything left, indexes the long-term
        items and prunes what expired."""
        key = command.key
        stored = await self._classifier.classify_through(key, through, erasure=erasure)
        folded = await self._compactor.compact(
            key, erasure=erasure, token_pressure=pressure, finalize=finalize
        )
        indexed = 0
        if self._indexer is not None:
            indexed = await self._indexer.index_messages(key, through, erasure=erasure)
            if stored or folded or finalize:
                indexed += await self._indexer.index_long_term(
                    key.tenant_id, key.user_id, erasure=erasure
                )
            if finalize:
                await self._indexer.prune_expired(key.tenant_id, key.user_id)
        await self._progress.mark_job_done(
            key.tenant_id, key.user_id, command.job_id, erasure=erasure
        )
        return Recorded(
            f"{command.kind}: {stored} notable events, turns {list(folded)} compacted, "
            f"{indexed} index entries"
        )
