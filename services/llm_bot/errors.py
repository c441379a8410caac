"""The service's exceptions: one root, two families (retryable and permanent).

Each error carries the stable ``code`` published in ErrorV1 and the DLQ headers. The
mapping from an error to a delivery outcome lives in one place:
``llm_bot.service.outcomes``.
"""

from __future__ import annotations

from typing import ClassVar

from llm_bot.contract import ErrorCode


class DependencyUnavailable(Exception):
    """A service llm-bot needs is not reachable at start; ``str()`` says which and how.
    A start-up failure, outside the delivery families below."""


class LlmBotError(Exception):
    """Root of every error the service raises on purpose."""

    code: ClassVar[ErrorCode] = "internal"
    retryable: ClassVar[bool] = False


class PermanentError(LlmBotError):
    """Retrying cannot help: terminal at once."""


class RetryableError(LlmBotError):
    """A transient failure: retried with backoff until the attempts run out."""

    retryable = True


class InvalidEvent(PermanentError):
    """The body is not a valid InternalEventV2 (JSON, schema, size or ids)."""

    code = "invalid_event"


class ModelRejected(PermanentError):
    """The model provider refused the request for a reason retrying cannot fix (4xx)."""

    code = "model_error"


class ModelUnavailable(RetryableError):
    """The model provider failed transiently (429, 5xx, connection error)."""

    code = "model_error"


class BudgetExceeded(PermanentError):
    """The tenant spent its token budget for the day or the month
    (``LLM_BOT_TENANT_TOKEN_BUDGETS``): no model call until the period ends. An event
    refused for it is answered with ErrorV1 and acked, never dead-lettered (a replay
    would only be refused again, or spend a budget meant for new requests)."""

    code = "budget_exceeded"

    def __init__(self, tenant_id: str, period: str) -> None:
        super().__init__(f"tenant {tenant_id} spent its token budget for the {period}")
        self.tenant_id = tenant_id
        self.period = period


class ModelTimeout(RetryableError):
    """The model did not answer within ``OPENAI_TIMEOUT_MS``."""

    code = "timeout"


class EmbeddingUnavailable(RetryableError):
    """The embedding model failed (an endpoint's 429/5xx/timeout, or a local model error)."""

    code = "model_error"


class IndexModelMismatch(PermanentError):
    """The user's retrieval index holds vectors of another embedding model (the model was
    changed): ``llm-bot memory reindex`` rebuilds it."""

    code = "internal"


class MemoryUnavailable(RetryableError):
    """Redis could not be reached or failed."""

    code = "memory_unavailable"


class ErasedMeanwhile(RetryableError):
    """The user's memory is being or was erased (``memory.forget``) since a memory job read
    their erasure mark: the job's writes are refused and the job runs again on what is left
    (nothing, if its conversation was erased)."""

    code = "memory_unavailable"


class MemoryConflict(RetryableError):
    """Another event of the conversation committed first; process again on fresh memory."""

    code = "memory_unavailable"


class ConversationBusy(RetryableError):
    """Another process held the conversation's lease for longer than the wait allows."""

    code = "internal"


class PublishFailed(RetryableError):
    """The broker did not confirm a publish."""

    code = "internal"
