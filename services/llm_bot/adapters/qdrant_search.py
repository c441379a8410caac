"""The search of the Qdrant retrieval index (``qdrant_recall_index.py``): the dense
ranking is Qdrant's cosine search over the user's points, BM25 is computed here over the
points holding a query term (their terms fetched), and the rankings are fused and collapsed
with the pieces the in-memory search uses (``memory/ranking.py``, ``memory/hit_collapse.py``);
texts and vectors are fetched for the head of the fused ranking only."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client.http.models import models as qm

from llm_bot.adapters.qdrant_points import (
    Collection,
    dated_within,
    entry_of,
    field_in,
    field_is,
    has_id,
    of_user,
)
from llm_bot.memory.hit_collapse import Candidate, collapse_within
from llm_bot.memory.ranking import (
    CANDIDATES_PER_RANKING,
    FEEDBACK_ENTRIES,
    FEEDBACK_WEIGHT,
    best_of,
    bm25_scores,
    feedback_asked,
    feedback_candidates,
    feedback_terms,
    found_by,
    found_cosines,
    fuse,
    query_speakers,
    rank,
    restricted_ranking,
    speaker_ranking,
)
from llm_bot.memory.recall_items import IndexEntry, SearchHit
from llm_bot.memory.scoring import days_within
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.vectors import Vector, unit

_FACET_LIMIT = 4096
"""Distinct entry lengths read for the average length (a passage has ~800 terms at most)."""
Details = dict[str, tuple[IndexEntry, Vector | None]]


@dataclass(frozen=True)
class _Rows:
    """A search's points (``ids``) and, by row, their best cosine and BM25 over the
    message and its questions, whether a dense ranking returned them, the BM25 of the
    words relevance feedback added, and whether any of these found them relevant."""

    ids: list[str]
    dense: Vector
    keyword: Vector
    found: npt.NDArray[np.bool_]
    added: Vector
    relevant: npt.NDArray[np.bool_]


class QdrantSearch:
    """One collection's search (``QdrantRecallIndex.search`` runs it, its failures
    translated there)."""

    def __init__(self, points: Collection) -> None:
        self._points = points
        """The index's own: what it learns of the collection (its size, whether a point
        holds several vectors) holds for both."""
        self._client = points.client
        self._name = points.name

    async def run(
        self, tenant_id: str, user_id: str, query: SearchQuery, *, model: str, size: int
    ) -> list[SearchHit]:
        vector = None if query.vector is None else unit(query.vector)
        sized = vector if vector is not None and vector.size == size else None
        dense_hits, within, (by_keyword, fields, by_part_keyword, sizes) = await asyncio.gather(
            self._dense(tenant_id, user_id, query, model, sized),
            self._dense_within(tenant_id, user_id, query, model, sized),
            self._keyword(tenant_id, user_id, query),
        )
        within_ids = [str(p.id) for p in within]
        ids = list(dict.fromkeys([str(p.id) for p in dense_hits] + within_ids + list(by_keyword)))
        dense = np.zeros(len(ids), dtype=np.float32)
        dense[: len(dense_hits)] = [p.score for p in dense_hits]
        found = np.arange(len(ids)) < len(dense_hits)
        keyword = np.fromiter((by_keyword.get(p, 0.0) for p in ids), np.float32, len(ids))
        rankings = _keyword_rankings(keyword, ids, fields, query)
        models = {f["model"] for f in fields.values()}
        if vector is not None and (dense_hits or model in models):
            rankings.insert(0, rank(dense, found, CANDIDATES_PER_RANKING))
        else:  # dense search off, or the user's vectors are another model's
            query, sized = replace(query, vector=None), None
        relevant = found_by(dense, keyword, query)  # as hybrid_search.search decides it
        rankings += await self._time_rankings(
            tenant_id,
            user_id,
            query,
            model=model,
            ids=ids,
            within_ids=within_ids,
            fields=fields,
            keyword=keyword,
        )
        # the message's rankings fused (with relevance feedback's), then each question's,
        # the best score of each kept
        message, added = await self._fused_with_feedback(
            tenant_id, user_id, query, rankings, (dense, keyword, relevant),
            ids=ids, fields=fields, sizes=sizes,
        )  # fmt: skip
        fused = [message]
        relevant = np.pad(relevant, (0, len(added) - len(relevant))) | (added > 0)
        part_probes: list[tuple[Vector, float]] = []  # the questions' unit embeddings
        for asked, part_keyword in zip(query.parts, by_part_keyword, strict=True):
            # dense off, or the user's vectors another model's: the parts by keywords too
            part = asked if query.vector is not None else replace(asked, vector=None)
            if part.vector is not None and (probe := unit(part.vector)).size == size:
                part_probes.append((probe, part.min_score))
            (
                part_rankings,
                part_within,
                (part_dense, part_found, part_words),
            ) = await self._part_rankings(
                tenant_id, user_id, part, part_keyword, model=model, size=size, ids=ids
            )
            part_rankings += await self._time_rankings(
                tenant_id,
                user_id,
                part,
                model=model,
                ids=ids,
                within_ids=part_within,
                fields=fields,
                keyword=part_words,
            )
            fused.append(fuse(part_rankings, (found_cosines(part_dense, part), part_words)))
            relevant = np.pad(relevant, (0, len(part_words) - len(relevant)))
            relevant |= part_found | (part_words > 0)
            dense, keyword, found = _best_by_row(
                (dense, keyword, found), (part_dense, part_words, part_found)
            )
        grown = (0, len(ids) - len(dense))  # the points only feedback's words brought
        dense, keyword, found = np.pad(dense, grown), np.pad(keyword, grown), np.pad(found, grown)
        added, relevant = np.pad(added, (0, len(ids) - len(added))), np.pad(relevant, grown)
        merged = best_of(fused, (found_cosines(dense, query), keyword))
        probes = [*([] if sized is None else [(sized, query.min_score)]), *part_probes]
        rows = _Rows(ids, dense, keyword, found, added, relevant)
        return await self._hits(
            tenant_id, user_id, query, merged, rows, probes=probes, dense_first=sized is not None
        )

    async def _hits(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        merged: list[tuple[int, float]],
        rows: _Rows,
        *,
        probes: list[tuple[Vector, float]],
        dense_first: bool,
    ) -> list[SearchHit]:
        """The hits of the fused ranking ``merged``: its head's texts and vectors fetched,
        read on only as far as the collapse needs. ``probes``: the unit embeddings of the
        message (first, when ``dense_first``) and its questions, each with its minimum, to
        compare with an entry none of their dense rankings returned."""
        details: Details = {}

        def candidate(row: int, score: float) -> Candidate | None:
            """The row's candidate; None when nothing found it relevant
            (``ranking.found_by``): no keyword match, no feedback word, no cosine at
            or above the minimum of the message or of a question."""
            entry, stored = details[rows.ids[row]]
            cosine = float(rows.dense[row])  # the best of the message's and its questions'
            reached = bool(rows.relevant[row])
            if stored is not None:  # below the minimum, beyond the depth, or not asked
                for probe, minimum in probes[1 if rows.found[row] and dense_first else 0 :]:
                    similarity = float(stored @ probe)
                    cosine, reached = max(cosine, similarity), reached or similarity >= minimum
            if not reached:
                return None
            return Candidate(
                entry,
                score,
                cosine,
                float(rows.keyword[row]),
                stored,
                feedback=float(rows.added[row]),
            )

        head = 0
        while True:  # the hits of a head are the head of the hits: read on only if needed
            head = min(len(merged), max(2 * query.limit, 2 * head))
            wanted = [rows.ids[row] for row, _ in merged[:head] if rows.ids[row] not in details]
            details.update(
                await self._details(tenant_id, user_id, wanted, query.vector is not None)
            )
            heading = (
                kept
                for row, s in merged[:head]
                if rows.ids[row] in details and (kept := candidate(row, s)) is not None
            )
            hits, complete = collapse_within(heading, query)
            if complete or head == len(merged):
                return hits

    async def _part_rankings(
        self,
        tenant_id: str,
        user_id: str,
        part: SearchQuery,
        by_keyword: dict[str, float],
        *,
        model: str,
        size: int,
        ids: list[str],
    ) -> tuple[list[list[int]], list[str], tuple[Vector, npt.NDArray[np.bool_], Vector]]:
        """One question of a message that asks several, ranked on its own as
        ``hybrid_search.search`` ranks its parts: its dense ranking (at least its nearest
        few) and its keyword ranking; ``ids`` grows by the points it brings. Returns those
        rankings, its points dated within the periods it names, and by row of ``ids``: its
        cosines of the points it ranked densely, which of those reach its minimum, its BM25."""
        vector = None if part.vector is None else unit(part.vector)
        sized = vector if vector is not None and vector.size == size else None
        hits, within = await asyncio.gather(
            self._dense(tenant_id, user_id, part, model, sized),
            self._dense_within(tenant_id, user_id, part, model, sized),
        )
        row_of = {point: row for row, point in enumerate(ids)}
        for point in [*(str(h.id) for h in hits), *(str(w.id) for w in within), *by_keyword]:
            if point not in row_of:
                row_of[point] = len(ids)
                ids.append(point)
        dense = np.zeros(len(ids), dtype=np.float32)
        ranked = np.zeros(len(ids), dtype=np.bool_)
        for hit in hits:
            dense[row_of[str(hit.id)]] = hit.score
            ranked[row_of[str(hit.id)]] = True
        words = np.zeros(len(ids), dtype=np.float32)
        for point, score in by_keyword.items():
            words[row_of[point]] = score
        rankings = [rank(words, words > 0, CANDIDATES_PER_RANKING)]
        if sized is not None:
            rankings.insert(0, rank(dense, ranked, CANDIDATES_PER_RANKING))
        return (
            rankings,
            [str(w.id) for w in within],
            (dense, ranked & (dense >= part.min_score), words),
        )

    async def _time_rankings(  # the pieces of one search
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        *,
        model: str,
        ids: list[str],
        within_ids: list[str],
        fields: dict[str, dict[str, Any]],
        keyword: Vector,
    ) -> list[list[int]]:
        """The rankings a message's time adds, as ``ranking.time_rankings`` makes them:
        the points dated within the periods it names (by cosine when dense search is on,
        else by BM25 among the keyword matches), and for a when-question the keyword matches
        whose text dates something. Rows index ``ids``."""
        rankings: list[list[int]] = []
        matched = keyword > 0
        if query.periods:
            if query.vector is not None:
                all_within = await self._all_within(tenant_id, user_id, query, model)
                if within_ids and not all_within:
                    row_of = {point: row for row, point in enumerate(ids)}
                    rankings.append([row_of[p] for p in within_ids])
            else:
                days = np.fromiter(
                    (int(fields.get(p, {}).get("day", 0)) for p in ids), np.int32, len(ids)
                )
                inside = days_within(days, query.periods)
                if (by_period := restricted_ranking(keyword, matched, inside)) is not None:
                    rankings.append(by_period)
        if query.asks_when:
            dating = np.fromiter(
                (bool(fields.get(p, {}).get("dating")) for p in ids), np.bool_, len(ids)
            )
            if (by_dating := restricted_ranking(keyword, matched, dating)) is not None:
                rankings.append(by_dating)
        return rankings

    async def _dense_within(
        self, tenant_id: str, user_id: str, query: SearchQuery, model: str, vector: Vector | None
    ) -> list[qm.ScoredPoint]:
        """The user's points dated within the periods the query names, by cosine, whatever
        the dense minimum (``ranking.time_rankings``)."""
        if vector is None or not query.periods:
            return []
        excluded = [field_in("source_id", [*query.exclude])] if query.exclude else None
        response = await self._client.query_points(
            self._name,
            query=self._points.query_vector(vector),
            query_filter=of_user(
                tenant_id,
                user_id,
                field_is("model", model),
                dated_within(query.periods),
                must_not=excluded,
            ),
            limit=CANDIDATES_PER_RANKING,
        )
        return response.points

    async def _all_within(
        self, tenant_id: str, user_id: str, query: SearchQuery, model: str
    ) -> bool:
        """Whether every point the dense ranking may rank is within the periods: then the
        period ranking would only repeat it, and it is left out (as in ``search``)."""
        excluded = [field_in("source_id", [*query.exclude])] if query.exclude else None
        every = of_user(tenant_id, user_id, field_is("model", model), must_not=excluded)
        outside = of_user(
            tenant_id,
            user_id,
            field_is("model", model),
            must_not=[*(excluded or []), dated_within(query.periods)],
        )
        total, rest = await asyncio.gather(self._points.count(every), self._points.count(outside))
        return total > 0 and rest == 0

    async def _dense(
        self, tenant_id: str, user_id: str, query: SearchQuery, model: str, vector: Vector | None
    ) -> list[qm.ScoredPoint]:
        if vector is None:
            return []
        excluded = [field_in("source_id", [*query.exclude])] if query.exclude else None
        response = await self._client.query_points(
            self._name,
            query=self._points.query_vector(vector),
            query_filter=of_user(tenant_id, user_id, field_is("model", model), must_not=excluded),
            limit=CANDIDATES_PER_RANKING,
            score_threshold=query.min_score,
        )
        if len(response.points) < query.nearest:  # at least the nearest few, whatever the cosine
            response = await self._client.query_points(
                self._name,
                query=self._points.query_vector(vector),
                query_filter=of_user(
                    tenant_id, user_id, field_is("model", model), must_not=excluded
                ),
                limit=query.nearest,
            )
        return response.points

    async def _fused_with_feedback(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        rankings: list[list[int]],
        scores: tuple[Vector, Vector, npt.NDArray[np.bool_]],
        *,
        ids: list[str],
        fields: dict[str, dict[str, Any]],
        sizes: tuple[int, float],
    ) -> tuple[list[tuple[int, float]], Vector]:
        """The message's ``rankings`` fused, and fused again with relevance feedback's
        ranking when it adds words (``_feedback``, which may grow ``ids``); ``scores``: the
        dense and keyword scores by row, ties' tie-breakers, and whether they found the
        row relevant (feedback reads the first fused rows that they found, as
        ``hybrid_search.search`` does). With it, by row of ``ids``: the BM25 of the words
        feedback added (zeros when none)."""
        dense, keyword, relevant = scores
        fused = fuse(rankings, (found_cosines(dense, query), keyword))
        top = [ids[row] for row, _ in fused if relevant[row]][:FEEDBACK_ENTRIES]
        feedback = await self._feedback(
            tenant_id, user_id, query, top, ids=ids, fields=fields, keyword=keyword, sizes=sizes
        )
        if feedback is None:
            return fused, np.zeros(len(ids), dtype=np.float32)
        ranking, added = feedback
        grown = (0, len(ids) - len(dense))
        dense, keyword = np.pad(dense, grown), np.pad(keyword, grown)
        return fuse([*rankings, ranking], (found_cosines(dense, query), keyword)), added

    async def _feedback(
        self,
        tenant_id: str,
        user_id: str,
        query: SearchQuery,
        top: list[str],
        *,
        ids: list[str],
        fields: dict[str, dict[str, Any]],
        keyword: Vector,
        sizes: tuple[int, float],
    ) -> tuple[list[int], Vector] | None:
        """Relevance feedback's ranking, as ``hybrid_search.feedback_ranking`` makes it:
        the words the ``top`` points share (``feedback_terms``: their terms fetched when
        the keywords did not fetch them, the frequencies from every point holding one of
        the words it may choose), ranked by BM25 with the query's (``keyword``, by row of
        ``ids``), points only those words reach appended to ``ids``, and the added words'
        BM25 by row; None when no word is added."""
        missing = [point for point in top if point not in fields]
        if missing:
            records = await self._points.scroll(
                of_user(tenant_id, user_id, has_id(missing)), fields=["terms", "speaker"]
            )
            fields = {**fields, **{str(r.id): r.payload or {} for r in records}}
        documents = [fields[p]["terms"] for p in top if p in fields]
        asked = feedback_asked(query, (fields[p]["speaker"] for p in top if p in fields))
        wanted = feedback_candidates(documents, asked)
        if not wanted:
            return None
        holders = await self._points.scroll(
            of_user(tenant_id, user_id, field_in("terms", sorted(wanted))),
            fields=["terms", "source_id"],
        )
        held = [r.payload or {} for r in holders]
        frequency = Counter(t for f in held for t in set(f["terms"]) if t in wanted)
        count, average = sizes
        terms = feedback_terms(documents, asked, frequency, count)
        if not terms:
            return None
        scores = bm25_scores([f["terms"] for f in held], terms, count=count, average=average)
        row_of = {point: row for row, point in enumerate(ids)}
        by_point = {
            str(record.id): float(score)
            for record, fielded, score in zip(holders, held, scores, strict=True)
            if score > 0 and fielded["source_id"] not in query.exclude
        }
        for point in by_point:  # the points only the added words reach join the rows
            if point not in row_of:
                row_of[point] = len(ids)
                ids.append(point)
        added = np.zeros(len(ids), dtype=np.float32)
        added[[row_of[point] for point in by_point]] = list(by_point.values())
        combined = np.pad(keyword, (0, len(ids) - len(keyword))) + FEEDBACK_WEIGHT * added
        return rank(combined, combined > 0, CANDIDATES_PER_RANKING), added

    async def _keyword(
        self, tenant_id: str, user_id: str, query: SearchQuery
    ) -> tuple[
        dict[str, float], dict[str, dict[str, Any]], list[dict[str, float]], tuple[int, float]
    ]:
        """BM25 of the user's points holding a query term (0 for excluded sources), by point
        id, with the user's entry count and average length; those points' payload fields
        that ranking reads (speaker, model, day, dating), by point id; the same BM25 for
        each of the query's parts (their terms are fetched with the message's); and the
        entry count and average length."""
        terms = list(dict.fromkeys([*query.terms, *(t for p in query.parts for t in p.terms)]))
        user = of_user(tenant_id, user_id)
        if not terms:
            return {}, {}, [{} for _ in query.parts], await self._sizes(user)
        holders, (count, average) = await asyncio.gather(
            self._points.scroll(
                of_user(tenant_id, user_id, field_in("terms", terms)),
                fields=["terms", "source_id", "model", "speaker", "day", "dating"],
            ),
            self._sizes(user),
        )
        fields = [r.payload or {} for r in holders]
        documents = [f["terms"] for f in fields]

        def scored(asked: Sequence[str]) -> dict[str, float]:
            """BM25 for ``asked``, of the points holding one of its terms."""
            wanted = set(asked)
            scores = bm25_scores(documents, asked, count=count, average=average)
            return {
                str(r.id): 0.0 if f["source_id"] in query.exclude else float(score)
                for r, f, score in zip(holders, fields, scores, strict=True)
                if not wanted.isdisjoint(f["terms"])
            }

        return (
            scored(query.terms),
            {str(r.id): f for r, f in zip(holders, fields, strict=True)},
            [scored(part.terms) for part in query.parts],
            (count, average),
        )

    async def _sizes(self, user: qm.Filter) -> tuple[int, float]:
        """The user's entry count and their average length in terms (BM25's)."""
        lengths = await self._client.facet(self._name, "doc_length", user, _FACET_LIMIT, exact=True)
        count = sum(hit.count for hit in lengths.hits)
        return count, sum(int(hit.value) * hit.count for hit in lengths.hits) / (count or 1)

    async def _details(
        self, tenant_id: str, user_id: str, ids: list[str], vectors: bool
    ) -> Details:
        """Entries of the points ``ids``, with their unit vectors when ``vectors``."""
        if not ids:
            return {}
        records = await self._points.scroll(
            of_user(tenant_id, user_id, has_id(ids)), vectors=vectors
        )
        return {str(r.id): (entry_of(r.payload or {}), _own_vector(r.vector)) for r in records}


def _own_vector(stored: object) -> Vector | None:
    """An entry's own unit embedding from a point's vector(s) (the first of several)."""
    if not isinstance(stored, list) or not stored:
        return None
    first = stored[0] if isinstance(stored[0], list) else stored
    return unit(np.asarray(first, np.float32))


def _keyword_rankings(
    keyword: Vector, ids: Sequence[str], fields: dict[str, dict[str, Any]], query: SearchQuery
) -> list[list[int]]:
    """The keyword ranking of the points ``ids`` (BM25 by row) and, when the query names a
    speaker, the keyword ranking among what the named speakers said."""
    matched = keyword > 0
    rankings = [rank(keyword, matched, CANDIDATES_PER_RANKING)]
    speakers = {p: f["speaker"] for p, f in fields.items()}
    named = query_speakers(set(speakers.values()), query)
    spoken = np.fromiter((speakers.get(p) in named for p in ids), np.bool_, len(ids))
    by_speaker = speaker_ranking(keyword, matched, spoken) if named else None
    if by_speaker is not None:
        rankings.append(by_speaker)
    return rankings


def _best_by_row(
    scores: tuple[Vector, Vector, npt.NDArray[np.bool_]],
    part: tuple[Vector, Vector, npt.NDArray[np.bool_]],
) -> tuple[Vector, Vector, npt.NDArray[np.bool_]]:
    """The message's cosines, BM25 scores and found flags by row, widened to the rows a
    question brought (``part``'s length) and the best of the two kept."""
    grown = (0, len(part[0]) - len(scores[0]))
    dense, keyword, found = (np.pad(scores[0], grown), np.pad(scores[1], grown), scores[2])
    return (
        np.maximum(dense, part[0]),
        np.maximum(keyword, part[1]),
        np.pad(found, grown) | part[2],
    )
