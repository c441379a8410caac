"""``llm-bot memory export`` and ``import``: a user's (or a tenant's) whole memory out of
Redis as JSON Lines, one user per line, and back (SPEC 7.2.1; format: docs/memory.md
"Export and import").

Both stream: export reads and writes one user at a time (memory bounded by the largest
user, plus the tenant's user ids), import reads one line at a time; progress goes to
stderr. Import re-embeds the index entries with this deployment's model (vectors are not
exported), refuses a user whose erasure is in progress (and writes nothing of a user
erased while it runs), and refuses a line of another tenant than ``--tenant`` unless
``--from-tenant`` names it (its users then move into ``--tenant``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.adapters.redis_user_memory import RedisUserMemory
from llm_bot.bootstrap import embedder, rate_limiter, recall_index, redis_client
from llm_bot.config import ConfigurationError, Settings
from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.errors import ErasedMeanwhile
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.ports import Embedder, RecallIndex
from llm_bot.service.indexer import EMBED_BATCH, embed_entries
from llm_bot.telemetry.metrics import Metrics

FORMAT = "llm-bot.memory"
VERSION = 1
PROGRESS_SECONDS = 1.0
Progress = Callable[[str], None]


def entry_record(entry: IndexEntry) -> dict[str, Any]:
    """An index entry in the export: its text and metadata, no vector."""
    return {
        "id": entry.id,
        "kind": entry.kind,
        "text": entry.text,
        "speaker": entry.speaker,
        "date": entry.date,
        "conversation_id": entry.conversation_id,
        "turn": entry.turn,
        "seq": entry.seq,
        "source_id": entry.source_id,
        "terms": list(entry.terms),
        "indexed_at": entry.indexed_at,
        "dating": entry.says_when,
    }


def entry_of(record: dict[str, Any]) -> IndexEntry:
    return IndexEntry(
        id=record["id"],
        kind=record["kind"],
        text=record["text"],
        speaker=record["speaker"],
        date=record["date"],
        conversation_id=record["conversation_id"],
        turn=int(record["turn"]),
        seq=int(record["seq"]),
        source_id=record["source_id"],
        terms=tuple(record["terms"]),
        indexed_at=float(record["indexed_at"]),
        dating=bool(record["dating"]) if record.get("dating") is not None else None,
    )


class LineSink(Protocol):
    """Where the export writes its lines (a text file, stdout)."""

    def write(self, text: str, /) -> object: ...


class _Ticker:
    """Progress on stderr at most once a second, and at the end: done, rate."""

    def __init__(self, progress: Progress, verb: str, total: int | None) -> None:
        self._progress = progress
        self._verb = verb
        self._total = total
        self._started = self._last = time.monotonic()
        self.done = 0

    def tick(self, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < PROGRESS_SECONDS:
            return
        self._last = now
        rate = self.done / max(now - self._started, 1e-9)
        of = f"/{self._total}" if self._total is not None else ""
        self._progress(f"{self._verb} {self.done}{of} users ({rate:.0f} users/s)")


async def export_memory(
    settings: Settings,
    tenant_id: str,
    user_id: str | None,
    out: LineSink,
    *,
    progress: Progress,
) -> int:
    """Write the memory of ``user_id`` (or of every user of the tenant) to ``out``, one
    JSON line per user; returns the users written. A user being erased is left out (named
    on ``progress``)."""
    _check_id(tenant_id, "--tenant")
    if user_id is not None:
        _check_id(user_id, "--user")
    client = redis_client(settings.redis)
    try:
        store = RedisUserMemory(client=client, keys=RedisKeys(prefix=settings.redis.key_prefix))
        index = recall_index(settings, client)
        users = [user_id] if user_id is not None else await store.users(tenant_id)
        ticker = _Ticker(progress, "exported", len(users))
        for user in users:
            record = await user_record(store, index, tenant_id, user, progress=progress)
            if record is not None and (user_id is not None or holds_memory(record)):
                out.write(dumped_line(record))
                ticker.done += 1
            ticker.tick()
        ticker.tick(final=True)
        return ticker.done
    finally:
        await client.aclose()


def holds_memory(record: dict[str, Any]) -> bool:
    """Whether an export line holds anything (a tenant's export leaves out users of whom
    only an erasure mark is left)."""
    long_term = record["long_term"]
    return bool(
        record["conversations"]
        or record["index"]["entries"]
        or any(long_term[kind] for kind in ("profile", "facts", "episodes", "events"))
    )


def dumped_line(record: dict[str, Any]) -> str:
    """One line of the export: the record as compact JSON, then a newline."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


async def user_record(
    store: RedisUserMemory,
    index: RecallIndex,
    tenant_id: str,
    user_id: str,
    *,
    progress: Progress,
) -> dict[str, Any] | None:
    """One user's line of the export (None while the user is being erased)."""
    try:
        erasure = await store.erasure(tenant_id, user_id)
        memory = await store.read(tenant_id, user_id)
        model, entries = (
            await index.entries(tenant_id, user_id)
            if isinstance(index, RedisRecallIndex)
            else (None, [])
        )
        unchanged = await store.erasure(tenant_id, user_id) == erasure  # not erased meanwhile
    except ErasedMeanwhile:
        unchanged = False
    if not unchanged:
        progress(f"{tenant_id}/{user_id}: left out: an erasure of this user is in progress")
        return None
    return {
        "format": FORMAT,
        "version": VERSION,
        "tenant": tenant_id,
        "user": user_id,
        "exported_at": datetime.now(UTC).isoformat(),
        **memory,
        "index": {"model": model, "entries": [entry_record(entry) for entry in entries]},
    }


@dataclass
class ImportResult:
    imported: int = 0
    refused: int = 0
    index_entries: int = 0


async def import_memory(
    settings: Settings,
    lines: Iterable[str],
    *,
    tenant_id: str,
    from_tenant: str | None,
    progress: Progress,
    model: Embedder | None = None,
) -> ImportResult:
    """Import every line (see the module); a line of another tenant stops the import with
    a ``ConfigurationError`` before anything of it is written. ``model``: the embedder
    (default: the configured one, ``LLM_BOT_EMBEDDINGS``)."""
    _check_id(tenant_id, "--tenant")
    owned = model is None
    if model is None:
        metrics = Metrics(registry=CollectorRegistry())
        model = embedder(settings, rate_limiter(settings.rate_limits, metrics))
    client = redis_client(settings.redis)
    result = ImportResult()
    ticker = _Ticker(progress, "imported", None)
    try:
        store = RedisUserMemory(client=client, keys=RedisKeys(prefix=settings.redis.key_prefix))
        index = recall_index(settings, client)
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _parsed(line, number)
            if record["tenant"] not in (tenant_id, from_tenant):
                raise ConfigurationError(
                    f"line {number} holds tenant {record['tenant']!r}, not {tenant_id!r}: "
                    f"to import it into {tenant_id!r}, add --from-tenant {record['tenant']}"
                )
            if await _import_user(
                store, index, model=model, tenant_id=tenant_id, record=record, progress=progress
            ):
                result.imported += 1
                result.index_entries += len(record["index"]["entries"]) if model else 0
            else:
                result.refused += 1
            ticker.done = result.imported
            ticker.tick()
        ticker.tick(final=True)
        if model is None:
            progress("retrieval is off (LLM_BOT_EMBEDDINGS=off): no index entries imported")
        return result
    finally:
        if owned and model is not None:
            await model.aclose()
        await client.aclose()


async def _import_user(
    store: RedisUserMemory,
    index: RecallIndex,
    *,
    model: Embedder | None,
    tenant_id: str,
    record: dict[str, Any],
    progress: Progress,
) -> bool:
    user_id = record["user"]
    try:
        erasure = await store.erasure(tenant_id, user_id)
        await store.write(tenant_id, user_id, record, erasure=erasure)
        if model is not None:
            await index.forget_user(tenant_id, user_id)
            entries = [entry_of(entry) for entry in record["index"]["entries"]]
            for start in range(0, len(entries), EMBED_BATCH):
                embedded = await embed_entries(model, entries[start : start + EMBED_BATCH])
                await index.upsert(tenant_id, user_id, embedded, model=model.name, erasure=erasure)
    except ErasedMeanwhile:
        progress(f"{tenant_id}/{user_id}: refused: an erasure of this user is in progress")
        return False
    return True


def _parsed(line: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"line {number} is not JSON: {exc.msg}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ConfigurationError(f"line {number} is not an llm-bot memory export")
    if record.get("version") != VERSION:
        raise ConfigurationError(
            f"line {number} is format version {record.get('version')!r}; this llm-bot reads "
            f"version {VERSION}"
        )
    for field in ("tenant", "user"):
        _check_id(str(record.get(field, "")), f"line {number}: {field}")
    return record


def _check_id(value: str, what: str) -> None:
    if re.fullmatch(ID_PATTERN, value) is None:
        raise ConfigurationError(f"{what}: {value!r} is not a valid id")
