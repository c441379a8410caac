"""Semantic facts that stay true (SPEC 5.5): restatements merge, corrections supersede.

The summarizer sees the user's related stored facts and says for each fact it extracts
whether it is new (``add``), changes a stored one (``update`` with that fact's id) or
restates one (``none`` with its id). :func:`apply_fact` turns that decision into the
facts to write, and checks it:

- a text identical (after :func:`normalize_fact`) to a current fact is a restatement,
  whatever the decision;
- an ``update`` supersedes its target: the new text becomes a current fact of its own, the
  old one stays stored with ``superseded_by`` (never shown in prompts, still erasable,
  visible in ``memory show``); a superseded fact restated later comes back to life;
- a ``none`` whose text changes a value of its target (:func:`contradiction`) is an update;
- without a usable target, the deterministic dedupe: the most similar current fact (word
  Jaccard ≥ ``RESTATEMENT_SIMILARITY``, character bigrams for unspaced scripts) absorbs a
  restatement, but never a text that differs from it in negation, a number, a date or a
  name: the negation of a stored fact supersedes it (both cannot hold; compared with the
  negators set aside, so "ไม่ได้ ... แล้ว" and "no longer" are found too); other changed
  values are kept side by side unless the summarizer said ``update``.

Pure and deterministic: rerunning the same compaction (same source) changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from llm_bot.memory.fact_values import adds_values, contradiction, without_negation
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.long_term import SemanticFact, Source, normalize_fact, stable_id

RESTATEMENT_SIMILARITY = 0.75
UPDATE_SIMILARITY = 0.4
"""An ``update`` naming no stored fact replaces the most similar one at least this close
whose values it changes."""
CONFIDENCE_BOOST = 0.1
RELATED_FACTS = 30
"""Stored facts the summarizer sees with each batch (the most related ones)."""

FactAction = Literal["add", "update", "none"]
Outcome = Literal["added", "updated", "merged", "unchanged"]


@dataclass(frozen=True)
class FactDecision:
    """One fact as the summarizer returned it."""

    fact: str
    tags: tuple[str, ...] = ()
    confidence: float = 0.5
    action: FactAction = "add"
    target: str | None = None


@dataclass(frozen=True)
class FactChange:
    """What one decision does: its outcome and the facts to write (the current one first,
    then the one it superseded, if any)."""

    outcome: Outcome
    facts: tuple[SemanticFact, ...]

    @property
    def current(self) -> SemanticFact:
        return self.facts[0]


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, kana, CJK): a
# space there separates phrases at the writer's whim, so words are no unit to compare.
_UNSPACED_SCRIPT = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff]"
)


def _tokens(text: str) -> set[str]:
    normalized = normalize_fact(text)
    words = set(normalized.split())
    if _UNSPACED_SCRIPT.search(normalized) or (len(words) <= 1 and len(normalized) > 3):
        compact = normalized.replace(" ", "")  # unspaced scripts (Thai): character bigrams
        return {compact[i : i + 2] for i in range(len(compact) - 1)} or words
    return words


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of word sets (character bigrams for unspaced text)."""
    left, right = _tokens(a), _tokens(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def is_current(fact: SemanticFact) -> bool:
    return fact.superseded_by is None


def related_facts(
    facts: Iterable[SemanticFact], text: str, limit: int = RELATED_FACTS
) -> list[SemanticFact]:
    """The current facts the summarizer should see for turns saying ``text``: all of them
    when there are at most ``limit``, else the ``limit`` sharing the most words (bigrams)
    with it, then the best scored; in id order (a stable prompt)."""
    current = [f for f in facts if is_current(f)]
    if len(current) > limit:
        said = _tokens(text)
        current = sorted(
            current,
            key=lambda f: (-len(_tokens(f.fact) & said), -f.salience * f.confidence, f.id),
        )[:limit]
    return sorted(current, key=lambda f: f.id)


def apply_fact(
    known: Mapping[str, SemanticFact],
    decision: FactDecision,
    *,
    salience: float,
    source: Source,
    now: str,
) -> FactChange:
    """The facts to write for ``decision``, given every stored fact by id (``known``,
    current and superseded, including what this batch wrote already)."""
    how, fact = _choose(known, decision)
    if how == "merge" and fact is not None:
        return _merge(fact, decision, salience=salience, source=source, now=now)
    if how == "supersede" and fact is not None:
        return _supersede(known, fact, decision, salience=salience, source=source, now=now)
    return _add(known, decision, salience=salience, source=source, now=now)


def _choose(
    known: Mapping[str, SemanticFact], decision: FactDecision
) -> tuple[Literal["merge", "supersede", "add"], SemanticFact | None]:
    """Whether ``decision`` merges into, supersedes or stands beside the stored facts, and
    which fact it merges into or supersedes."""
    text = decision.fact.strip()
    current = [f for f in known.values() if is_current(f)]
    target = _current_version(known, decision.target)
    same = next((f for f in current if normalize_fact(f.fact) == normalize_fact(text)), None)
    if same is not None:
        return "merge", same
    if target is not None and decision.action != "add":
        changes = decision.action == "update" or contradiction(target.fact, text) is not None
        return ("supersede" if changes else "merge"), target
    similar = _most_similar(current, text, RESTATEMENT_SIMILARITY)
    if similar is not None:
        return _against_similar(similar, decision), similar
    negated = _negated(current, text)
    if negated is not None:
        return "supersede", negated
    if decision.action == "update":
        changed = [f for f in current if contradiction(f.fact, text) is not None]
        closest = _most_similar(changed, text, UPDATE_SIMILARITY)
        if closest is not None:
            return "supersede", closest
    return "add", None


def _negated(facts: Iterable[SemanticFact], text: str) -> SemanticFact | None:
    """The current fact ``text`` negates: the most similar one of the other polarity once
    the negators ("not", "no longer", ไม่ได้ ... แล้ว) are set aside, compared by keyword
    terms (stems without function words: "likes" meets "does not like")."""
    bare = set(keyword_terms(without_negation(text)))
    best: tuple[float, str, SemanticFact] | None = None
    for fact in facts:
        if contradiction(fact.fact, text) != "negation":
            continue
        other = set(keyword_terms(without_negation(fact.fact)))
        value = len(bare & other) / len(bare | other) if bare and other else 0.0
        if value >= RESTATEMENT_SIMILARITY and (best is None or (value, fact.id) > best[:2]):
            best = (value, fact.id, fact)
    return best[2] if best else None


def _against_similar(
    similar: SemanticFact, decision: FactDecision
) -> Literal["merge", "supersede", "add"]:
    """The deterministic dedupe: a restatement merges; a negation supersedes (both cannot
    hold); another changed value stands beside it unless the summarizer said ``update``."""
    difference = contradiction(similar.fact, decision.fact)
    if difference is None:
        return "merge"
    if difference == "negation" or decision.action == "update":
        return "supersede"
    return "add"


def apply_facts(
    stored: Iterable[SemanticFact],
    decisions: Sequence[FactDecision],
    *,
    salience: float,
    source: Source,
    now: str,
) -> tuple[list[SemanticFact], list[Outcome]]:
    """Every decision of one batch in order: the facts to write (each id once, last state)
    and each decision's outcome."""
    known = {f.id: f for f in stored}
    written: dict[str, SemanticFact] = {}
    outcomes: list[Outcome] = []
    for decision in decisions:
        change = apply_fact(known, decision, salience=salience, source=source, now=now)
        outcomes.append(change.outcome)
        for fact in change.facts:
            known[fact.id] = written[fact.id] = fact
    return list(written.values()), outcomes


def _current_version(known: Mapping[str, SemanticFact], fact_id: str | None) -> SemanticFact | None:
    """The fact ``fact_id`` names, or what superseded it (followed to the current one)."""
    seen: set[str] = set()
    fact = known.get(fact_id) if fact_id else None
    while fact is not None and fact.superseded_by is not None and fact.id not in seen:
        seen.add(fact.id)
        fact = known.get(fact.superseded_by)
    return fact if fact is not None and is_current(fact) else None


def _most_similar(
    facts: Iterable[SemanticFact], text: str, threshold: float
) -> SemanticFact | None:
    best: tuple[float, str, SemanticFact] | None = None
    for fact in facts:
        value = similarity(fact.fact, text)
        if value >= threshold and (best is None or (value, fact.id) > best[:2]):
            best = (value, fact.id, fact)
    return best[2] if best else None


def _raised(old: float, new: float) -> float:
    top = max(old, new)
    # rounded for stable storage, never below what it was (rounding could lower it)
    return max(top, round(min(1.0, top + CONFIDENCE_BOOST * (1 - top)), 4))


def _merge(
    match: SemanticFact, decision: FactDecision, *, salience: float, source: Source, now: str
) -> FactChange:
    """A restatement: same id, higher confidence, merged sources and tags; the new text
    only when it elaborates (adds a value and changes none)."""
    if source in match.sources:
        return FactChange("unchanged", (match,))  # the same compaction again
    text = decision.fact.strip()
    return FactChange(
        "merged",
        (
            match.model_copy(
                update={
                    "fact": text if adds_values(match.fact, text) else match.fact,
                    "confidence": _raised(match.confidence, decision.confidence),
                    "salience": max(match.salience, salience),
                    "tags": tuple(sorted(set(match.tags) | set(decision.tags))),
                    "sources": (*match.sources, source),
                    "updated_at": now,
                }
            ),
        ),
    )


def _add(
    known: Mapping[str, SemanticFact],
    decision: FactDecision,
    *,
    salience: float,
    source: Source,
    now: str,
) -> FactChange:
    """A new current fact; a superseded fact with the same text comes back to life."""
    text = decision.fact.strip()
    fact_id = stable_id("fact", normalize_fact(text))
    previous = known.get(fact_id)
    if previous is not None:  # stated before and superseded since: current again
        if source in previous.sources:
            return FactChange("unchanged", (previous,))
        return FactChange(
            "added",
            (
                previous.model_copy(
                    update={
                        "fact": text,
                        "superseded_by": None,
                        "superseded_at": None,
                        "confidence": decision.confidence,
                        "salience": salience,
                        "tags": tuple(sorted(set(decision.tags))),
                        "sources": (*previous.sources, source),
                        "updated_at": now,
                    }
                ),
            ),
        )
    return FactChange(
        "added",
        (
            SemanticFact(
                id=fact_id,
                fact=text,
                tags=tuple(sorted(set(decision.tags))),
                confidence=decision.confidence,
                salience=salience,
                sources=(source,),
                created_at=now,
                updated_at=now,
            ),
        ),
    )


def _supersede(
    known: Mapping[str, SemanticFact],
    old: SemanticFact,
    decision: FactDecision,
    *,
    salience: float,
    source: Source,
    now: str,
) -> FactChange:
    """The new text as a current fact; ``old`` kept, superseded by it."""
    added = _add(known, decision, salience=salience, source=source, now=now).current
    retired = old.model_copy(
        update={"superseded_by": added.id, "superseded_at": now, "updated_at": now}
    )
    return FactChange("updated", (added, retired))


__all__ = [
    "RELATED_FACTS",
    "RESTATEMENT_SIMILARITY",
    "FactAction",
    "FactChange",
    "FactDecision",
    "Outcome",
    "apply_fact",
    "apply_facts",
    "is_current",
    "related_facts",
    "similarity",
]
