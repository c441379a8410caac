"""What forgetting one conversation takes out of long-term memory (SPEC 5.8), pure.

Everything derived from the conversation goes: its episodes and notable events, the
profile attributes it set, and every fact whose sources are only that conversation. A fact
with other sources stays, without this conversation's. A fact the deleted one had
superseded points past it to what came after, or, when nothing did, is current again:
long-term memory reads as if the conversation had never happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from llm_bot.memory.long_term import (
    EpisodicSummary,
    NotableEvent,
    ProfileAttribute,
    SemanticFact,
)


@dataclass(frozen=True)
class ConversationPruning:
    """The deletes and rewrites that forget one conversation."""

    deleted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Kind (``profile``, ``facts``, ``episodes``, ``events``) → ids (profile: keys)."""
    rewritten: tuple[SemanticFact, ...] = ()
    """Facts that stay, with a source or a ``superseded_by`` changed."""

    def count(self) -> int:
        return sum(len(ids) for ids in self.deleted.values()) + len(self.rewritten)


def prune_conversation(
    conversation_id: str,
    *,
    profile: Mapping[str, ProfileAttribute],
    facts: Iterable[SemanticFact],
    episodes: Iterable[EpisodicSummary],
    events: Iterable[NotableEvent],
) -> ConversationPruning:
    """The pruning that forgets ``conversation_id`` in this user's long-term memory."""
    by_id = {fact.id: fact for fact in facts}
    gone: dict[str, SemanticFact] = {}
    kept: dict[str, SemanticFact] = {}
    for fact in by_id.values():
        sources = tuple(s for s in fact.sources if s.conversation_id != conversation_id)
        if not sources:
            gone[fact.id] = fact
        elif sources != fact.sources:
            kept[fact.id] = fact.model_copy(update={"sources": sources})
    kept = relinked(by_id, gone, kept)
    return ConversationPruning(
        deleted={
            "profile": tuple(
                key
                for key, attribute in sorted(profile.items())
                if attribute.source is not None
                and attribute.source.conversation_id == conversation_id
            ),
            "facts": tuple(sorted(gone)),
            "episodes": tuple(e.id for e in episodes if e.conversation_id == conversation_id),
            "events": tuple(e.id for e in events if e.conversation_id == conversation_id),
        },
        rewritten=tuple(kept[fact_id] for fact_id in sorted(kept)),
    )


def relinked(
    facts: Mapping[str, SemanticFact],
    gone: Mapping[str, SemanticFact],
    kept: Mapping[str, SemanticFact],
) -> dict[str, SemanticFact]:
    """``kept`` (facts that stay, already rewritten) plus every fact that stays and was
    superseded by a deleted one, pointed past it to what came after, or current again when
    nothing did (a removed correction brings the value it replaced back)."""
    rewritten = dict(kept)
    for fact in facts.values():
        if fact.id in gone or fact.superseded_by not in gone:
            continue
        successor = _past(gone, fact.superseded_by)
        current = rewritten.get(fact.id, fact)
        update: dict[str, object] = {"superseded_by": successor}
        if successor is None:
            update["superseded_at"] = None
        rewritten[fact.id] = current.model_copy(update=update)
    return rewritten


def _past(gone: Mapping[str, SemanticFact], fact_id: str | None) -> str | None:
    """The first fact after ``fact_id`` in its chain of corrections that is not deleted."""
    seen: set[str] = set()
    while fact_id is not None and fact_id in gone and fact_id not in seen:
        seen.add(fact_id)
        fact_id = gone[fact_id].superseded_by
    return None if fact_id in seen else fact_id


__all__ = ["ConversationPruning", "prune_conversation", "relinked"]
