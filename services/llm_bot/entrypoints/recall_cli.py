"""``llm-bot memory show --query TEXT`` and ``llm-bot memory reindex``: what a message would
recall, and building the retrieval index for memory recorded before it existed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import NoOpTracerProvider
from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_connection import RedisClient
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_registry import backfill
from llm_bot.bootstrap import (
    embedder,
    long_term_store,
    memory_store,
    progress_store,
    rate_limiter,
    recall_index,
    redis_client,
    retriever_settings,
    utc_now,
)
from llm_bot.config import ConfigurationError, Settings
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.ports import Embedder, RecallIndex
from llm_bot.service.indexer import Indexer
from llm_bot.service.retriever import Retriever
from llm_bot.telemetry.metrics import Metrics


@dataclass
class _Parts:
    client: RedisClient
    embedder: Embedder
    index: RecallIndex
    metrics: Metrics


@asynccontextmanager
async def _parts(settings: Settings) -> AsyncIterator[_Parts]:
    metrics = Metrics(registry=CollectorRegistry())
    model = embedder(settings, rate_limiter(settings.rate_limits, metrics))
    if model is None:
        raise ConfigurationError(
            "invalid configuration: LLM_BOT_EMBEDDINGS: retrieval is off; set local or openai"
        )
    client = redis_client(settings.redis)
    try:
        yield _Parts(client, model, recall_index(settings, client), metrics)
    finally:
        await model.aclose()
        await client.aclose()


async def show_recall(settings: Settings, key: ConversationKey, text: str) -> list[dict[str, Any]]:
    """What ``text``, sent now in the conversation, would recall (before the budget), with
    each item's fused, dense and keyword scores."""
    async with _parts(settings) as parts:
        retriever = Retriever(
            embedder=parts.embedder,
            index=parts.index,
            settings=retriever_settings(settings.retrieval, settings.model.context_budget()),
            metrics=parts.metrics,
            tracer=NoOpTracerProvider().get_tracer(__name__),
        )
        recalled = await memory_store(settings, parts.client).load(key, "show")
        shown = {m.id for m in recalled.memory.messages} | recalled.bundle.item_ids()
        hits = await retriever.search(text, key, exclude=shown)
    return [
        {
            "id": hit.entry.id,
            "score": round(hit.score, 4),
            "dense": round(hit.dense, 4),
            "keyword": round(hit.keyword, 4),
            "date": hit.entry.date,
            "speaker": hit.entry.speaker,
            "conversation_id": hit.entry.conversation_id,
            "turn": hit.entry.turn,
            "text": hit.entry.text,
        }
        for hit in hits
    ]


def render_recall(hits: list[dict[str, Any]]) -> str:
    if not hits:
        return "would recall nothing"
    lines = [f"would recall {len(hits)} items (best first; score = fused, dense, keyword):"]
    lines.extend(
        f"  {h['score']:.3f} {h['dense']:.3f} {h['keyword']:6.2f}  ({h['date'][:10]}, "
        f"{h['speaker'] or '-'}) {h['text']}"
        for h in hits
    )
    return "\n".join(lines)


async def reindex(
    settings: Settings,
    *,
    tenant_id: str | None,
    user_id: str | None,
    rebuild: bool,
    progress: Callable[[str], None] = print,
) -> int:
    """Index every conversation (raw trace) and long-term item of the selected users; with
    ``rebuild`` their index is dropped first (after a change of embedding model). Returns
    the entries written. Safe beside a running worker: both write under the user's erasure
    generation and neither writes an entry twice."""
    keys = RedisKeys(prefix=settings.redis.key_prefix)
    client = redis_client(settings.redis)
    try:
        users = await _conversations_by_user(client, keys, tenant_id, user_id)
        for tenant, user in sorted(users):  # memory from before the key registry existed
            fixed = {*keys.fixed_user_keys(tenant, user), keys.erasure(tenant, user)}
            pattern = keys.user_pattern(tenant, user)
            await backfill(client, keys.registry(tenant, user), pattern, fixed=fixed)
    finally:
        await client.aclose()
    if settings.retrieval.embeddings == "off":
        progress(f"{len(users)} users' keys registered; retrieval is off: nothing indexed")
        return 0
    async with _parts(settings) as parts:
        worker_progress = progress_store(settings, parts.client)
        indexer = Indexer(
            progress=worker_progress,
            ltm=long_term_store(settings, parts.client),
            index=parts.index,
            embedder=parts.embedder,
            metrics=parts.metrics,
            clock=utc_now,
        )
        written = 0
        for (tenant, user), conversations in sorted(users.items()):
            erasure = await worker_progress.erasure(tenant, user)
            if rebuild:
                await parts.index.forget_user(tenant, user)
            for key in sorted(conversations, key=lambda k: k.conversation_id):
                if rebuild:
                    await worker_progress.reset_indexed(key)
                written += await indexer.index_messages(key, erasure=erasure)
            written += await indexer.index_long_term(tenant, user, erasure=erasure)
            await indexer.prune_expired(tenant, user)
            progress(f"{tenant}/{user}: {len(conversations)} conversations indexed")
    return written


async def _conversations_by_user(
    client: RedisClient, keys: RedisKeys, tenant_id: str | None, user_id: str | None
) -> dict[tuple[str, str], list[ConversationKey]]:
    users: dict[tuple[str, str], list[ConversationKey]] = {}
    pattern = keys.conversation_meta_pattern(tenant_id, user_id)
    async for name in client.scan_iter(match=pattern, count=1000):
        key = keys.parse_conversation_meta(name.decode())
        if key is not None:
            users.setdefault((key.tenant_id, key.user_id), []).append(key)
    return users


__all__ = ["reindex", "render_recall", "show_recall"]
