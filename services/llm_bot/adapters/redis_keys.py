"""Every Redis key of llm-bot, built in this one module (SPEC 5.8).

Layout: ``llmbot:{<tenant>|<user>}:<kind>:<id>``. The braces are a Redis Cluster hash tag:
all keys of one tenant + user live in one slot, so a commit touching several of them is
one atomic script. ``|`` and ``}`` cannot occur in ids (SPEC id pattern), so two tenants
or users can never produce the same key, and ``llmbot:{<tenant>|<user>}:*`` matches
exactly one user's keys. Ids are validated again here before any key is built.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass

from llm_bot.contract.identifiers import ID_PATTERN
from llm_bot.memory.conversation_key import ConversationKey

_ID = re.compile(ID_PATTERN)


def _checked(value: str, what: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError(f"{what} does not match the id pattern")
    return value


@functools.lru_cache(maxsize=4096)
def _user_scope(prefix: str, tenant_id: str, user_id: str) -> str:
    """``prefix:{tenant|user}``, its ids checked; remembered per user (an event builds it
    about 20 times), an invalid id raising every time (an exception is not cached)."""
    tenant = _checked(tenant_id, "tenant_id")
    user = _checked(user_id, "user_id")
    return f"{prefix}:{{{tenant}|{user}}}"


def activity_member(key: ConversationKey) -> str:
    """A conversation's member in the activity set (``RedisKeys.activity``)."""
    return f"{key.tenant_id}|{key.user_id}|{key.conversation_id}"


def parse_activity_member(member: str) -> ConversationKey:
    tenant_id, user_id, conversation_id = member.split("|", 2)
    return ConversationKey(tenant_id, user_id, conversation_id)


def user_member(tenant_id: str, user_id: str) -> str:
    """A user's member in the retention schedule (``RedisKeys.retention_schedule``)."""
    return f"{tenant_id}|{user_id}"


def parse_user_member(member: str) -> tuple[str, str]:
    tenant_id, user_id = member.split("|", 1)
    return tenant_id, user_id


SCHEDULE_SHARDS = 8
"""Shards of each schedule outside users' scopes (activity, retention, tool rounds,
flows): each shard is its own hash tag, so a Redis Cluster spreads them over its masters
and no node carries a whole schedule."""


@dataclass(frozen=True)
class ScheduleKeys:
    """The sorted sets of one schedule: one per shard, a user's members always in the same
    shard (by tenant and user), and ``legacy``, the unsharded name of releases before the
    schedules were sharded: still read and drained, never written."""

    shards: tuple[str, ...]
    legacy: str

    def of(self, member: str) -> str:
        """The shard of a member (``tenant|user`` or ``tenant|user|conversation``)."""
        user = "|".join(member.split("|", 2)[:2])
        return self.shards[zlib.crc32(user.encode()) % len(self.shards)]

    @property
    def every(self) -> tuple[str, ...]:
        """Every name a sweep reads: the shards and the legacy name."""
        return (*self.shards, self.legacy)


@dataclass(frozen=True)
class RedisKeys:
    """Key builder; ``prefix`` lets tests and multiple deployments share one Redis."""

    prefix: str = "llmbot"

    def user_scope(self, tenant_id: str, user_id: str) -> str:
        return _user_scope(self.prefix, tenant_id, user_id)

    def working_memory(self, key: ConversationKey) -> str:
        return f"{self.user_scope(key.tenant_id, key.user_id)}:wm:{self._conv(key)}"

    def conversation_meta(self, key: ConversationKey) -> str:
        """Hash {turn, version}: outlives the working memory so turn numbers never repeat."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:meta:{self._conv(key)}"

    def raw_trace(self, key: ConversationKey) -> str:
        return f"{self.user_scope(key.tenant_id, key.user_id)}:trace:{self._conv(key)}"

    def lease(self, key: ConversationKey) -> str:
        """The conversation's processing lease (one holder at a time, across processes);
        ``*`` is the user's own: held for writes to the user's long-term memory."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:lease:{self._conv_or_all(key)}"

    def parked(self, key: ConversationKey) -> str:
        """List of the conversation's deliveries waiting in the fair queue, oldest first
        (``redis_fair_queue.py``); in the user's slot, beside the lease."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:park:{self._conv_or_all(key)}"

    def parked_claims(self, key: ConversationKey) -> str:
        """Hash: parked delivery uid -> how many times it was taken (a poison bound)."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:parkn:{self._conv_or_all(key)}"

    def parked_overflow(self, key: ConversationKey) -> str:
        """Set of the event ids of the conversation's deliveries moved to an overflow queue
        and not admitted yet: while it has any, the conversation's later deliveries go
        there too, behind them (publish order)."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:parkx:{self._conv_or_all(key)}"

    def fair_shard(self, lane: str, shard: int) -> str:
        """The prefix of one shard of the fair queue's global index for one ingress queue
        (``lane``): its ready conversations per tenant, the tenants with any, the taken
        conversations. The shard number is the hash tag."""
        return f"{self.prefix}:{{fair:{shard}}}:{lane.replace('{', '(').replace('}', ')')}"

    def fair_tenants(self, lane: str, shard: int) -> str:
        """Set of the tenants of the shard that have ready conversations."""
        return f"{self.fair_shard(lane, shard)}:tenants"

    def fair_ready(self, lane: str, shard: int, tenant_id: str) -> str:
        """Sorted set of a tenant's ready conversations (member ``tenant|user|conversation``)
        by when they may be taken."""
        return f"{self.fair_shard(lane, shard)}:ready:{_checked(tenant_id, 'tenant_id')}"

    def fair_taken(self, lane: str, shard: int) -> str:
        """Sorted set of conversations taken for processing, by when to look at them
        again: one whose taker died is made ready again from here."""
        return f"{self.fair_shard(lane, shard)}:taken"

    def fair_acks(self, holder: str) -> str:
        """List of the uids of deliveries a replica (``holder``) admitted and another one
        completed: the admitter holds each unacked in RabbitMQ until it reads it here."""
        return f"{self.prefix}:{{fairack:{_checked(holder, 'holder')}}}:done"

    def flow(self, key: ConversationKey) -> str:
        """Hash of the checkpoints of the conversation's flow (``redis_checkpointer.py``)."""
        return f"{self.user_scope(key.tenant_id, key.user_id)}:flow:{self._conv(key)}"

    def processed_event(self, key: ConversationKey, event_id: str) -> str:
        scope = self.user_scope(key.tenant_id, key.user_id)
        return f"{scope}:evt:{_checked(event_id, 'event_id')}"

    def long_term(self, tenant_id: str, user_id: str, kind: str) -> str:
        """Long-term memory of one user: ``profile``, ``facts``, ``episodes``, ``events``
        (hashes of JSON items) and ``bundle`` (the pre-ranked selection recall loads)."""
        if kind not in ("profile", "facts", "episodes", "events", "bundle"):
            raise ValueError(f"unknown long-term kind {kind!r}")
        return f"{self.user_scope(tenant_id, user_id)}:ltm:{kind}"

    def recall_index(self, tenant_id: str, user_id: str, part: str) -> str:
        """The user's retrieval index: ``meta`` (hash: epoch, seq, model), ``doc`` (hash:
        entry id -> JSON), ``vec`` (hash: entry id -> float16 embedding), ``seq`` (sorted
        set: entry id by the write sequence that last changed it), ``tomb`` (sorted set:
        removed entry id by the write sequence of its removal)."""
        if part not in ("meta", "doc", "vec", "seq", "tomb"):
            raise ValueError(f"unknown index part {part!r}")
        return f"{self.user_scope(tenant_id, user_id)}:idx:{part}"

    def memory_job(self, tenant_id: str, user_id: str, job_id: str) -> str:
        """Marker of a memory job already done (idempotency of the worker)."""
        return f"{self.user_scope(tenant_id, user_id)}:job:{_checked(job_id, 'job_id')}"

    def erasure(self, tenant_id: str, user_id: str) -> str:
        """The user's erasure mark (a hash: generation and erasures in progress; see
        ``redis_erasure.py``), the one key an erasure leaves, for a day."""
        return f"{self.user_scope(tenant_id, user_id)}:erasure"

    def registry(self, tenant_id: str, user_id: str) -> str:
        """Sorted set of the user's keys that have ids in their names, by expiry time (see
        ``redis_registry.py``): what erasure deletes besides the fixed names."""
        return f"{self.user_scope(tenant_id, user_id)}:keys"

    def fixed_user_keys(self, tenant_id: str, user_id: str) -> tuple[str, ...]:
        """The user's keys whose names hold no id: long-term memory and the index."""
        return (
            *(
                self.long_term(tenant_id, user_id, kind)
                for kind in ("profile", "facts", "episodes", "events", "bundle")
            ),
            *(
                self.recall_index(tenant_id, user_id, part)
                for part in ("meta", "doc", "vec", "seq", "tomb")
            ),
        )

    def token_spend(self, tenant_id: str, period_id: str) -> str:
        """Tokens a tenant's model calls spent in one period (``period_id``: the UTC day
        ``YYYYMMDD`` or month ``YYYYMM``), a counter. Each its own hash tag, so a cluster
        spreads tenants and periods; outside users' scopes (no tenant or user pattern
        matches it: ``|`` never occurs in it)."""
        if not period_id.isdigit() or len(period_id) not in (6, 8):
            raise ValueError("period_id is not YYYYMMDD or YYYYMM")
        return f"{self.prefix}:{{tokens:{_checked(tenant_id, 'tenant_id')}:{period_id}}}:spent"

    def activity(self) -> ScheduleKeys:
        """Sorted sets of conversations by last activity (member
        ``tenant|user|conversation``), swept by the memory worker to finalize idle
        conversations. Outside users' scopes (sharded): erasure removes the members."""
        return self._schedule("activity")

    def tool_rounds(self) -> ScheduleKeys:
        """Sorted sets of conversations with an open tool round (member
        ``tenant|user|conversation``) by when its calls time out, swept by the memory
        worker. Outside users' scopes, like ``activity``; erasure removes the members."""
        return self._schedule("tool_rounds")

    def flows(self) -> ScheduleKeys:
        """Sorted sets of conversations with a flow running (member
        ``tenant|user|conversation``) by when it expires, swept by the memory worker.
        Outside users' scopes, like ``activity``; erasure removes the members."""
        return self._schedule("flows")

    def retention_schedule(self) -> ScheduleKeys:
        """Sorted sets of users (member ``tenant|user``) by when their oldest long-term
        item ages out: the worker's sweep applies retention to users who are due, active or
        not. Outside users' scopes, like ``activity``; erasure removes the member."""
        return self._schedule("retention")

    def _schedule(self, kind: str) -> ScheduleKeys:
        return ScheduleKeys(
            shards=tuple(f"{self.prefix}:{{sched:{n}}}:{kind}" for n in range(SCHEDULE_SHARDS)),
            legacy=f"{self.prefix}:{kind}",
        )

    def conversation_schedules(self) -> tuple[ScheduleKeys, ...]:
        """The sorted sets outside users' scopes whose members are conversations."""
        return (self.activity(), self.tool_rounds(), self.flows())

    def conversation_keys(self, key: ConversationKey) -> tuple[str, ...]:
        """The keys holding one conversation's memory (not its dedupe records)."""
        return (self.working_memory(key), self.conversation_meta(key), self.raw_trace(key))

    def conversation_meta_pattern(self, tenant_id: str | None, user_id: str | None) -> str:
        """SCAN pattern of the conversations' meta keys of one user, one tenant (user None)
        or everyone (both None); :meth:`parse_conversation_meta` reads the ids back."""
        if tenant_id is None:
            return f"{self.prefix}:{{*}}:meta:*"
        tenant = _checked(tenant_id, "tenant_id")
        user = "*" if user_id is None else _checked(user_id, "user_id")
        return f"{self.prefix}:{{{tenant}|{user}}}:meta:*"

    def parse_conversation_key(self, name: str) -> ConversationKey | None:
        """The conversation of a ``wm``, ``meta`` or ``trace`` key built here, else None."""
        head = f"{self.prefix}:{{"
        for kind in ("meta", "wm", "trace"):
            marker = f"}}:{kind}:"
            if name.startswith(head) and marker in name:
                scope, conversation = name[len(head) :].split(marker, 1)
                tenant, _, user = scope.partition("|")
                return self._built(ConversationKey(tenant, user, conversation), name, kind)
        return None

    def _built(self, key: ConversationKey, name: str, kind: str) -> ConversationKey | None:
        build = {
            "meta": self.conversation_meta,
            "wm": self.working_memory,
            "trace": self.raw_trace,
        }[kind]
        try:
            return key if build(key) == name else None
        except ValueError:
            return None

    def parse_conversation_meta(self, name: str) -> ConversationKey | None:
        """The conversation of a meta key built here (None for any other name)."""
        key = self.parse_conversation_key(name)
        return key if key is not None and self.conversation_meta(key) == name else None

    def user_pattern(self, tenant_id: str, user_id: str) -> str:
        """SCAN pattern matching every key of one user in one tenant, and nothing else."""
        return f"{self.user_scope(tenant_id, user_id)}:*"

    def tenant_pattern(self, tenant_id: str) -> str:
        """SCAN pattern matching every key of one tenant."""
        return f"{self.prefix}:{{{_checked(tenant_id, 'tenant_id')}|*"

    @staticmethod
    def _conv(key: ConversationKey) -> str:
        return _checked(key.conversation_id, "conversation_id")

    @classmethod
    def _conv_or_all(cls, key: ConversationKey) -> str:
        return "*" if key.conversation_id == "*" else cls._conv(key)
