"""What ``llm-bot memory export`` and ``import`` cost per user, and that their memory stays
bounded as the tenant grows (issue 43: a tenant of 10,000 users).

Run by hand (not part of `make test`), on a redis-server of its own:

    .venv/bin/python -m tests.bench.memory_transfer --users 10000

Each synthetic user holds what a regular user has after a few weeks: two conversations of
12 turns (a window of 8 messages and a summary, the raw trace of 24 messages), 8 facts
with sources, 2 episodes, a profile of 3 attributes and 40 index entries. The bench
writes one user's line, imports ``--users`` copies of it (other user ids) with a hashing
embedder (the Redis side and the re-embedding pipeline, not the model's time), exports the
tenant, then imports ``--model-users`` of them with the local embedding model (what a real
import costs per user). Memory: the growth of the process's peak RSS during each step,
measured for a tenant a tenth the size first, in the same run (bounded: the same for 10x
the users, but for the tenant's user ids that export lists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import redis
from prometheus_client import CollectorRegistry

from llm_bot.bootstrap import embedder, rate_limiter
from llm_bot.config import Settings
from llm_bot.entrypoints.memory_transfer import (
    FORMAT,
    VERSION,
    entry_record,
    export_memory,
    import_memory,
)
from llm_bot.logs import configure_logging
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.long_term import EpisodicSummary, ProfileAttribute, SemanticFact, Source
from llm_bot.memory.messages import ChatMessage
from llm_bot.memory.recall_items import IndexEntry
from llm_bot.memory.working import WorkingMemory
from llm_bot.ports import EmbeddingPurpose
from llm_bot.telemetry.metrics import Metrics
from tests.support.embeddings import DIMENSION, hashed_vector
from tests.support.harness import settings_for_test
from tests.support.service_control import private_redis
from tests.support.services import DEFAULT_AMQP_URL, ServiceUrls

NOW = "2026-11-20T10:00:00+00:00"
DAY_MS = 86_400_000


class QuietHashingEmbedder:
    """The ``Embedder`` port over the tests' hashed vectors (no model, nothing recorded)."""

    name = "bench-hashing"
    dimension = DIMENSION

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> np.ndarray:
        return np.vstack([hashed_vector(t, DIMENSION) for t in texts])

    async def aclose(self) -> None:
        return None


def _messages(conversation: str, turns: int) -> list[ChatMessage]:
    said = [
        ("user", "I want to plan a trip to Chiang Mai in March with my sister."),
        ("assistant", "Lovely! Would you like ideas for temples or for food first?"),
    ]
    return [
        ChatMessage(
            id=f"e{conversation}{turn}:{role}",
            role=role,
            content=f"{text} (turn {turn})",
            created_at=NOW,
            turn=turn,
            seq=seq,
            event_id=f"e{conversation}{turn}",
        )
        for turn in range(1, turns + 1)
        for seq, (role, text) in enumerate(said)
    ]


def template_user(tenant: str) -> dict[str, Any]:
    """One user's line of the export (its user id replaced per copy)."""
    now_ms = int(time.time() * 1000)
    conversations = []
    for conversation in ("c1", "c2"):
        trace = _messages(conversation, 12)
        window = WorkingMemory(
            messages=tuple(trace[-8:]), summary="They planned a trip; the user has a sister."
        )
        conversations.append(
            {
                "id": conversation,
                "window": window.model_dump(mode="json"),
                "meta": {"turn": "12", "version": "12", "compacted_through": "8"},
                "trace": [
                    {"score": m.turn * 1000 + m.seq, "message": m.model_dump(mode="json")}
                    for m in trace
                ],
                "flow": None,
                "expires_at": {"window": now_ms + DAY_MS, "meta": now_ms + 30 * DAY_MS},
                "activity_at": now_ms / 1000,
                "tool_round_due_at": None,
                "flow_due_at": None,
            }
        )
    facts = {
        f"f{n}": SemanticFact(
            id=f"f{n}",
            fact=f"The user likes topic {n} and mentioned it twice.",
            confidence=0.9,
            salience=0.6,
            sources=(Source(conversation_id="c1", turns=(n + 1,)),),
            created_at=NOW,
            updated_at=NOW,
        ).model_dump(mode="json")
        for n in range(8)
    }
    episodes = {
        f"ep{n}": EpisodicSummary(
            id=f"ep{n}",
            conversation_id=f"c{n + 1}",
            turns=(1, 2, 3, 4),
            summary="The user planned a trip to Chiang Mai with their sister.",
            salience=0.5,
            created_at=NOW,
        ).model_dump(mode="json")
        for n in range(2)
    }
    profile = {
        name: ProfileAttribute(key=name, value=value, updated_at=NOW).model_dump(mode="json")
        for name, value in (("name", "Ann"), ("language", "Thai"), ("city", "Bangkok"))
    }
    entries = [
        IndexEntry(
            id=f"m|c{n % 2 + 1}|e{n}",
            kind="message",
            text=f"on day {n} we talked about the trip to Chiang Mai and topic {n}",
            speaker="user",
            date=NOW,
            conversation_id=f"c{n % 2 + 1}",
            turn=n // 2 + 1,
            seq=n % 2,
            source_id=f"e{n}",
            terms=tuple(keyword_terms(f"on day {n} we talked about the trip to Chiang Mai")),
            indexed_at=1_763_600_000.0,
        )
        for n in range(40)
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "tenant": tenant,
        "user": "template",
        "exported_at": NOW,
        "conversations": conversations,
        "long_term": {
            "profile": profile,
            "facts": facts,
            "episodes": episodes,
            "events": {},
            "bundle": None,
            "expires_at": dict.fromkeys(("profile", "facts"), now_ms + 365 * DAY_MS),
        },
        "retention_due_at": None,
        "index": {"model": "bench", "entries": [entry_record(e) for e in entries]},
    }


def copies(template: dict[str, Any], start: int, count: int) -> Iterator[str]:
    """``count`` lines of the template, for users ``u<start>`` onwards (one at a time)."""
    for n in range(start, start + count):
        yield json.dumps({**template, "user": f"u{n:06d}"}, separators=(",", ":"))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class CountingSink:
    """Where the export writes: counts lines and bytes, keeps nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0
        self.bytes = 0

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        self.bytes += len(text.encode())
        return len(text)


async def _step(name: str, users: int, run: Any) -> dict[str, Any]:
    before = peak_rss_mb()
    started = time.perf_counter()
    await run
    seconds = time.perf_counter() - started
    row = {
        "step": name,
        "users": users,
        "seconds": round(seconds, 2),
        "users_per_s": round(users / seconds, 1),
        "peak_rss_growth_mb": round(peak_rss_mb() - before, 1),
    }
    print(json.dumps(row), flush=True)
    return row


async def bench(settings: Settings, users: int, model_users: int) -> list[dict[str, Any]]:
    tenant = "tbench"
    template = template_user(tenant)
    hashing = QuietHashingEmbedder()
    rows = []
    small = max(1, users // 10)

    def quiet(_: str) -> None:
        return None

    rows.append(
        await _step(
            "import (hashing embedder)",
            small,
            import_memory(
                settings,
                copies(template, 0, small),
                tenant_id=tenant,
                from_tenant=None,
                progress=quiet,
                model=hashing,
            ),
        )
    )
    rows.append(
        await _step(
            "export", small, export_memory(settings, tenant, None, CountingSink(), progress=quiet)
        )
    )
    rows.append(
        await _step(
            "import (hashing embedder)",
            users - small,
            import_memory(
                settings,
                copies(template, small, users - small),
                tenant_id=tenant,
                from_tenant=None,
                progress=quiet,
                model=hashing,
            ),
        )
    )
    sink = CountingSink()
    rows.append(
        await _step("export", users, export_memory(settings, tenant, None, sink, progress=quiet))
    )
    print(json.dumps({"export_lines": sink.lines, "export_mb": round(sink.bytes / 2**20, 1)}))
    local = embedder(
        settings, rate_limiter(settings.rate_limits, Metrics(registry=CollectorRegistry()))
    )
    assert local is not None  # LLM_BOT_EMBEDDINGS=local, the default
    try:
        rows.append(
            await _step(
                f"import ({local.name})",
                model_users,
                import_memory(
                    settings,
                    copies(template, users, model_users),
                    tenant_id=tenant,
                    from_tenant=None,
                    progress=quiet,
                    model=local,
                ),
            )
        )
    finally:
        await local.aclose()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--model-users", type=int, default=100)
    args = parser.parse_args(argv)
    configure_logging(level="WARNING", fmt="console")
    with private_redis() as server:
        settings = settings_for_test(
            ServiceUrls(amqp_url=DEFAULT_AMQP_URL, redis_url=server.url),
            "http://127.0.0.1:9/v1",
            redis_url=server.url,
        )
        rows = asyncio.run(bench(settings, args.users, args.model_users))
        used = server_memory_mb(server.port)
    print(json.dumps({"redis_used_memory_mb": used}))
    return 0 if rows else 1


def server_memory_mb(port: int) -> float:
    info = redis.Redis(port=port).info("memory")
    return round(float(info["used_memory"]) / 2**20, 1)


if __name__ == "__main__":
    sys.exit(main())
