"""The service's exceptions: one root, two families (retryable and permanent).

Each error carries the stable ``code`` published in ErrorV1 and the DLQ headers. The
mapping from an error to a delivery outcome lives in one place:
``llm_bot.service.outcomes``.

An error's message (``str(error)``) is the service's own short text: it goes on the bus
(ErrorV1 ``message``) and into the dead letter's ``x-error-message``. Text from outside (a
provider's error message, an exception's) never goes into it: it is the error's ``detail``,
which only logs read, through ``llm_bot.redaction.redacted`` (:func:`log_fields`).
"""

from __future__ import annotations

from typing import ClassVar

from llm_bot.contract import ErrorCode
from llm_bot.redaction import redacted


class DependencyUnavailable(Exception):
    """A service llm-bot needs is not reachable at start; ``str()`` says which and how.
    A start-up failure, outside the delivery families below."""


class LlmBotError(Exception):
    """Root of every error the service raises on purpose."""

    code: ClassVar[ErrorCode] = "internal"
    retryable: ClassVar[bool] = False

    def __init__(self, *args: object, detail: str | None = None) -> None:
        super().__init__(*args)
        self.detail = detail
        """Text from outside (a provider's, an exception's): logged redacted, never sent."""


def public_message(error: BaseException) -> str:
    """What the bus and the dead letter may say about ``error``: an ``LlmBotError``'s own
    text, else only the exception's type (its message may hold content or secrets)."""
    if isinstance(error, LlmBotError):
        return str(error)
    return f"unexpected {type(error).__name__}"


def log_fields(error: BaseException) -> dict[str, str]:
    """The fields a log line gives ``error``: its public text, its type and, when it has
    text from outside, a redacted excerpt of it (``detail``)."""
    fields = {"error": public_message(error), "error_type": type(error).__name__}
    detail = error.detail if isinstance(error, LlmBotError) else str(error)
    if detail:
        fields["detail"] = redacted(detail)
    return fields


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
