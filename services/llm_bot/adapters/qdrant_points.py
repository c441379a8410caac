"""How index entries are stored in Qdrant (``qdrant_recall_index.py``): point ids,
payloads, the filters that scope every request to one tenant + user, and the collection.

A point's id is a UUID5 of tenant, user and entry id, so writing an entry again replaces
it; its payload is the entry's fields plus ``tenant_id``, ``user_id``, ``digest``,
``model``, ``doc_length`` (how many keyword terms), ``day`` (the entry's date as a day
number, ``scoring.day_number``: the periods a message names filter on it), ``dating``
(whether its text says when something happened) and ``id_prefixes`` (the entry id's heads
up to each ``|``, so ``digests("m|")`` is one exact match). Points written before ``day``
and ``dating`` existed have neither: no period or when-question ranks them until
``llm-bot memory reindex --rebuild``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client import AsyncQdrantClient
from qdrant_client.http.exceptions import ApiException
from qdrant_client.http.models import models as qm

from llm_bot.memory.recall_items import SEPARATOR, IndexEntry
from llm_bot.memory.scoring import day_number
from llm_bot.memory.time_expressions import Period

COLLECTION = "llmbot_recall"
_PAGE = 1024
_NAMESPACE = uuid.UUID("5d7f6c1e-2b7a-4f4e-9a57-3f1c0e8b6a21")

PAYLOAD_INDEXES: tuple[tuple[str, qm.PayloadSchemaType | qm.KeywordIndexParams], ...] = (
    ("tenant_id", qm.PayloadSchemaType.KEYWORD),
    # one user's points stored together: every request is one user's
    ("user_id", qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)),
    ("terms", qm.PayloadSchemaType.KEYWORD),
    ("id_prefixes", qm.PayloadSchemaType.KEYWORD),
    ("conversation_id", qm.PayloadSchemaType.KEYWORD),
    ("doc_length", qm.PayloadSchemaType.INTEGER),  # the facet behind BM25's average length
    ("day", qm.PayloadSchemaType.INTEGER),  # the entry's date: periods a message names
)
"""Fields filtered on, and what Qdrant must index them as."""


def point_id(tenant_id: str, user_id: str, entry_id: str) -> str:
    """``|`` cannot occur in ids, so two (tenant, user, entry) never share a point."""
    return str(uuid.uuid5(_NAMESPACE, f"{tenant_id}|{user_id}|{entry_id}"))


def field_is(key: str, value: str) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))


def field_in(key: str, values: list[str]) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=qm.MatchAny(any=values))


def dated_within(periods: Sequence[Period]) -> qm.Filter:
    """Points whose ``day`` falls in one of ``periods``."""
    return qm.Filter(
        should=[
            qm.FieldCondition(
                key="day",
                range=qm.Range(gte=period.first.toordinal(), lte=period.last.toordinal()),
            )
            for period in periods
        ]
    )


def has_id(ids: list[str]) -> qm.HasIdCondition:
    return qm.HasIdCondition(has_id=list(ids))


def of_user(
    tenant_id: str,
    user_id: str,
    *more: qm.Condition,
    must_not: Sequence[qm.Condition] | None = None,
) -> qm.Filter:
    """The user's points (and ``more``): what every request is filtered by."""
    return qm.Filter(
        must=[field_is("tenant_id", tenant_id), field_is("user_id", user_id), *more],
        must_not=list(must_not) if must_not is not None else None,
    )


def payload(tenant_id: str, user_id: str, entry: IndexEntry, model: str) -> dict[str, Any]:
    parts = entry.id.split(SEPARATOR)
    return {
        "tenant_id": tenant_id,
        "user_id": user_id,
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
        "doc_length": len(entry.terms),
        "day": day_number(entry.date),
        "dating": entry.says_when,
        "indexed_at": entry.indexed_at,
        "digest": entry.digest,
        "model": model,
        "id_prefixes": [SEPARATOR.join(parts[:n]) + SEPARATOR for n in range(1, len(parts))],
    }


def entry_of(fields: dict[str, Any]) -> IndexEntry:
    return IndexEntry(
        id=fields["id"],
        kind=fields["kind"],
        text=fields["text"],
        speaker=fields["speaker"],
        date=fields["date"],
        conversation_id=fields["conversation_id"],
        turn=int(fields["turn"]),
        seq=int(fields["seq"]),
        source_id=fields["source_id"],
        terms=tuple(fields["terms"]),
        indexed_at=float(fields["indexed_at"]),
    )


class Collection:
    """The collection of every user's points: created with the size of the first vectors
    written (cosine, several vectors per point compared by their best: ``MAX_SIM``) and
    its payload indexes, read and deleted by filter.

    A collection created before points had several vectors (one vector each) stays in
    use: its points get their entry's own embedding only (``multivector`` false);
    ``llm-bot memory reindex --rebuild`` into a new collection gives them their
    sentences'."""

    def __init__(self, client: AsyncQdrantClient, name: str) -> None:
        self.client = client
        self.name = name
        self._size: int | None = None
        self.multivector = True
        """Whether a point holds several vectors (new collections do)."""
        self._prepared = False

    async def size(self) -> int | None:
        """Of its vectors; None while the collection does not exist."""
        if self._size is None and await self.client.collection_exists(self.name):
            vectors = (await self.client.get_collection(self.name)).config.params.vectors
            if isinstance(vectors, qm.VectorParams):
                self._size = vectors.size
                self.multivector = vectors.multivector_config is not None
        return self._size

    def point_vector(self, vectors: npt.NDArray[np.float32]) -> list[list[float]] | list[float]:
        """What a point stores of an entry's unit embeddings (its own first)."""
        rows: list[list[float]] = vectors.tolist()
        return rows if self.multivector else rows[0]

    def query_vector(self, vector: npt.NDArray[np.float32]) -> list[list[float]] | list[float]:
        """A query's unit embedding as the collection compares it."""
        values: list[float] = vector.tolist()
        return [values] if self.multivector else values

    async def prepare(self, size: int) -> int:
        """Create the collection (``size``) and its payload indexes, once per process (both
        idempotent); returns the size of its vectors."""
        if not self._prepared:
            if await self.size() is None:
                with contextlib.suppress(ApiException):  # another process created it first
                    await self.client.create_collection(
                        self.name,
                        qm.VectorParams(
                            size=size,
                            distance=qm.Distance.COSINE,
                            multivector_config=qm.MultiVectorConfig(
                                comparator=qm.MultiVectorComparator.MAX_SIM
                            ),
                        ),
                    )
            for field, schema in PAYLOAD_INDEXES:
                await self.client.create_payload_index(self.name, field, schema, wait=True)
            self._prepared = True
        return await self.size() or size

    async def scroll(
        self, selected: qm.Filter, *, fields: bool | list[str] = True, vectors: bool = False
    ) -> list[qm.Record]:
        """Every point ``selected`` (page after page)."""
        records: list[qm.Record] = []
        offset: qm.ExtendedPointId | None = None
        while True:
            page, offset = await self.client.scroll(
                self.name,
                selected,
                limit=_PAGE,
                offset=offset,
                with_payload=fields,
                with_vectors=vectors,
            )
            records += page
            if offset is None:
                return records

    async def count(self, selected: qm.Filter) -> int:
        return (await self.client.count(self.name, selected, exact=True)).count

    async def delete(self, selected: qm.Filter) -> None:
        await self.client.delete(self.name, qm.FilterSelector(filter=selected), wait=True)
