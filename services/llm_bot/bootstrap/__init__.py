"""The composition root: builds every collaborator from ``Settings``, handing each the
settings group(s) it uses (``config/groups.py``).

Nothing else in the package connects to anything or reads the environment. By process:
``service.py`` (``llm-bot run``), ``worker.py`` (``llm-bot worker``), on what both hold
(``foundation.py``) and the collaborators both are built from (``parts.py``).
"""

from __future__ import annotations

from llm_bot.bootstrap.foundation import Foundation, build_foundation
from llm_bot.bootstrap.parts import (
    DAY_SECONDS,
    DEFAULT_OPENAI_EMBEDDING_MODEL,
    KEYLESS_PLACEHOLDER,
    conversation_lease,
    embedder,
    flow_runner,
    lease_wait_seconds,
    long_term_store,
    memory_store,
    model_client,
    personas,
    progress_store,
    rate_limiter,
    recall_index,
    redis_client,
    redis_keys,
    retry_policy,
    token_guard,
    tool_round_schedule,
    utc_now,
)
from llm_bot.bootstrap.service import (
    Service,
    build_service,
    fairness,
    graph_context,
    retriever,
    retriever_settings,
)
from llm_bot.bootstrap.worker import WORKER_PREFETCH, Worker, build_worker, worker_indexer

__all__ = [
    "DAY_SECONDS",
    "DEFAULT_OPENAI_EMBEDDING_MODEL",
    "KEYLESS_PLACEHOLDER",
    "WORKER_PREFETCH",
    "Foundation",
    "Service",
    "Worker",
    "build_foundation",
    "build_service",
    "build_worker",
    "conversation_lease",
    "embedder",
    "fairness",
    "flow_runner",
    "graph_context",
    "lease_wait_seconds",
    "long_term_store",
    "memory_store",
    "model_client",
    "personas",
    "progress_store",
    "rate_limiter",
    "recall_index",
    "redis_client",
    "redis_keys",
    "retriever",
    "retriever_settings",
    "retry_policy",
    "token_guard",
    "tool_round_schedule",
    "utc_now",
    "worker_indexer",
]
