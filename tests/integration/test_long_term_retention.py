"""Retention reads long-term memory under the same WATCH as its write: a fact written by
someone else meanwhile is never dropped from the bundle by a rebuild from a stale read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio.client import Pipeline

from llm_bot.adapters.redis_erasure import NO_ERASURE
from llm_bot.adapters.redis_ltm import RedisLongTermStore
from llm_bot.bootstrap import long_term_store, redis_client
from llm_bot.config import Settings
from llm_bot.errors import MemoryUnavailable
from llm_bot.memory.long_term import SemanticFact
from tests.support.events import new_id

pytestmark = pytest.mark.integration

NOW = "2026-11-23T00:00:00+00:00"


def _fact(fact_id: str, text: str) -> SemanticFact:
    return SemanticFact(
        id=fact_id, fact=text, confidence=0.9, salience=0.9, created_at=NOW, updated_at=NOW
    )


class _RacedStore(RedisLongTermStore):
    """Another writer adds a fact right after this store read the facts."""

    def __init__(self, rival: RedisLongTermStore, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rival = rival
        self.raced = False

    async def _items(self, client: Any, tenant_id: str, user_id: str, kind: str, model: Any) -> Any:
        items = await super()._items(client, tenant_id, user_id, kind, model)
        if kind == "facts" and isinstance(client, Pipeline) and not self.raced:
            self.raced = True
            await self.rival.write(
                tenant_id, user_id, erasure=NO_ERASURE, facts=[_fact("f2", "likes tea")]
            )
        return items


async def test_a_concurrent_write_makes_retention_retry_instead_of_losing_it(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    client = redis_client(settings.redis)
    user = new_id("u")
    try:
        rival = long_term_store(settings, client)
        await rival.write("tret", user, erasure=NO_ERASURE, facts=[_fact("f1", "owns a cat")])
        plain = long_term_store(settings, client)
        raced = _RacedStore(rival, client=client, keys=plain._keys, retention=plain._retention)
        with pytest.raises(MemoryUnavailable, match="changed meanwhile"):
            await raced.apply_retention("tret", user, erasure=NO_ERASURE)
        assert raced.raced
        bundle = await rival.bundle("tret", user)
        await raced.apply_retention("tret", user, erasure=NO_ERASURE)  # the retry
        after_retry = await rival.bundle("tret", user)
    finally:
        await client.aclose()
    assert {f.id for f in bundle.facts} == {"f1", "f2"}  # the rival's rebuild stands
    assert {f.id for f in after_retry.facts} == {"f1", "f2"}
