"""The ``RecallIndex`` contract (SPEC 5.7, 5.8), one set of tests for every implementation:
``RedisRecallIndex`` on the real Redis, ``QdrantRecallIndex`` in qdrant-client's local
mode (no server) and the unit tests' ``InMemoryRecallIndex``. The erasure mark lives in the
real Redis for all three."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import pytest
import redis.asyncio as aioredis
from qdrant_client import AsyncQdrantClient

from llm_bot.adapters.qdrant_recall_index import QdrantRecallIndex
from llm_bot.adapters.redis_erasure import ErasureMarks, current_generation, generation
from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.adapters.redis_recall_index import RedisRecallIndex
from llm_bot.errors import ErasedMeanwhile, IndexModelMismatch
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.hybrid_search import search
from llm_bot.memory.index_snapshot import IndexSnapshot
from llm_bot.memory.keyword_terms import keyword_terms
from llm_bot.memory.recall_items import EntryKind, IndexEntry, SearchHit
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.time_expressions import asks_when, periods
from llm_bot.ports import RecallIndex
from tests.support.embeddings import hashed_vector, hashed_vectors
from tests.support.events import new_id
from tests.support.harness import TEST_KEY_PREFIX
from tests.support.in_memory_index import InMemoryRecallIndex
from tests.support.services import ServiceUrls

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
]

MODEL = "test-hashing"


@dataclass
class Index:
    """An index under test, the erasure mark's writer, and a fresh tenant and user."""

    index: RecallIndex
    redis: aioredis.Redis
    keys: RedisKeys
    tenant: str
    user: str

    async def put(self, *entries: IndexEntry, user: str | None = None, **kwargs: str) -> int:
        return await self.index.upsert(
            kwargs.pop("tenant", self.tenant),
            user or self.user,
            [(e, hashed_vectors(e)) for e in entries],
            model=kwargs.pop("model", MODEL),
            erasure=kwargs.pop("erasure", ""),
        )

    async def find(self, text: str, *, model: str = MODEL, **kwargs: object) -> list[str]:
        hits = await self.index.search(self.tenant, self.user, query(text, **kwargs), model=model)
        return [hit.entry.id for hit in hits]

    async def generation(self) -> str:
        return generation(await self.redis.hgetall(self.keys.erasure(self.tenant, self.user)))


@pytest.fixture(params=["redis", "qdrant", "memory"])
async def idx(request: pytest.FixtureRequest, service_urls: ServiceUrls) -> AsyncIterator[Index]:
    """A fresh index of one implementation, and a tenant and user no other test uses."""
    client = aioredis.from_url(service_urls.redis_url)
    keys = RedisKeys(prefix=TEST_KEY_PREFIX)
    qdrant = AsyncQdrantClient(location=":memory:")
    index: RecallIndex
    if request.param == "redis":
        index = RedisRecallIndex(client=client, keys=keys, ttl_seconds=3600, cache_entries=10_000)
    elif request.param == "qdrant":
        index = QdrantRecallIndex(client=qdrant, redis=client, keys=keys)
    else:

        async def mark(tenant_id: str, user_id: str) -> str:
            return await current_generation(client, keys, tenant_id, user_id)

        index = InMemoryRecallIndex(mark)
    yield Index(index, client, keys, new_id("t"), new_id("u"))
    await qdrant.close()
    await client.aclose()


def entry(
    entry_id: str,
    text: str,
    *,
    kind: EntryKind = "message",
    conversation: str = "c1",
    speaker: str = "Caroline",
    source: str | None = None,
) -> IndexEntry:
    return IndexEntry(
        id=entry_id,
        kind=kind,
        text=text,
        speaker=speaker,
        date="2023-05-08T10:00:00+00:00",
        conversation_id=conversation,
        turn=3,
        seq=7,
        source_id=source or entry_id.rsplit(":", 1)[-1],
        terms=tuple(keyword_terms(f"{speaker} {text}")),
        indexed_at=1_700_000_000.5,
    )


def query(text: str, **kwargs: object) -> SearchQuery:
    values: dict[str, object] = {"vector": hashed_vector(text), "terms": keyword_terms(text)}
    values.update(kwargs)
    return SearchQuery(**values)  # type: ignore[arg-type]


CAT = entry("m|c1|e1", "I adopted a cat named Biscuit last spring")
BIKE = entry("m|c1|e2", "My red bicycle has a flat tyre")
FACT = entry("l|facts|f1", "Prefers tea over coffee", kind="facts", conversation="", speaker="")


async def test_upsert_then_search_finds_the_entry_with_its_fields(idx: Index) -> None:
    """A written entry is found, every field as it was written."""
    assert await idx.put(CAT, BIKE, FACT) == 3
    hits = await idx.index.search(idx.tenant, idx.user, query("cat Biscuit"), model=MODEL)
    assert hits[0].entry == CAT
    assert (await idx.index.search(idx.tenant, idx.user, query("tea"), model=MODEL))[
        0
    ].entry == FACT


async def test_rewriting_is_idempotent_and_changed_text_replaces_the_old(idx: Index) -> None:
    """The same entries write nothing; a changed text is written and found by its new words."""
    await idx.put(CAT, BIKE)
    assert await idx.put(CAT, BIKE) == 0
    changed = entry(CAT.id, "I adopted a parrot called Mango")
    assert await idx.put(changed, BIKE) == 1
    assert CAT.id not in await idx.find("cat Biscuit")
    hits = await idx.index.search(idx.tenant, idx.user, query("parrot Mango"), model=MODEL)
    assert hits[0].entry == changed
    assert await idx.index.count(idx.tenant, idx.user) == 2


async def test_digests_list_ids_by_prefix(idx: Index) -> None:
    """``digests`` maps the ids starting with the prefix to their text digests."""
    other = entry("m|c2|e9", "We talked about the weather", conversation="c2")
    await idx.put(CAT, other, FACT)
    assert await idx.index.digests(idx.tenant, idx.user, "m|") == {
        CAT.id: CAT.digest,
        other.id: other.digest,
    }
    assert await idx.index.digests(idx.tenant, idx.user, "m|c1|") == {CAT.id: CAT.digest}
    assert await idx.index.digests(idx.tenant, idx.user, "l|") == {FACT.id: FACT.digest}
    assert await idx.index.digests(idx.tenant, new_id("u"), "m|") == {}


async def test_lookup_reads_back_the_entries_by_id_of_this_user_only(idx: Index) -> None:
    """``lookup`` returns the entries of the ids that exist, every field as written; one
    removed, never written, or another user's or tenant's under the same id is absent."""
    other_user, other_tenant = new_id("u"), new_id("t")
    await idx.put(CAT, BIKE, FACT)
    await idx.put(entry(BIKE.id, "another user's words"), user=other_user)
    await idx.put(entry("m|c1|e7", "another tenant's words"), tenant=other_tenant)
    ids = [FACT.id, CAT.id, "m|c1|missing", "m|c1|e7"]
    assert await idx.index.lookup(idx.tenant, idx.user, ids) == {FACT.id: FACT, CAT.id: CAT}
    await idx.index.remove(idx.tenant, idx.user, [CAT.id])
    assert await idx.index.lookup(idx.tenant, idx.user, [CAT.id, BIKE.id]) == {BIKE.id: BIKE}
    assert await idx.index.lookup(idx.tenant, idx.user, []) == {}
    assert await idx.index.lookup(idx.tenant, new_id("u"), [CAT.id]) == {}


async def test_remove_returns_how_many_existed(idx: Index) -> None:
    """Removed entries are gone from search and count; ids never written count for nothing."""
    await idx.put(CAT, BIKE)
    assert await idx.index.remove(idx.tenant, idx.user, [CAT.id, "m|c1|missing"]) == 1
    assert await idx.index.remove(idx.tenant, idx.user, []) == 0
    assert await idx.find("cat Biscuit") == []
    assert await idx.index.count(idx.tenant, idx.user) == 1


async def test_forget_conversation_removes_only_its_messages(idx: Index) -> None:
    """Its messages go; its episode, other conversations (ids sharing its prefix too) stay."""
    episode = entry("l|episodes|ep1", "Caroline got a cat", kind="episodes", speaker="")
    longer = entry("m|c1:x|e3", "A cat again, elsewhere", conversation="c1:x")
    tenth = entry("m|c10|e4", "Cats everywhere", conversation="c10")
    await idx.put(CAT, BIKE, episode, longer, tenth)
    assert await idx.index.forget_conversation(ConversationKey(idx.tenant, idx.user, "c1")) == 2
    left = await idx.index.digests(idx.tenant, idx.user, "")
    assert sorted(left) == sorted([episode.id, longer.id, tenth.id])


async def test_forget_user_removes_everything_of_the_user_only(idx: Index) -> None:
    """Every entry of the user goes; the same user id in another tenant and another user stay."""
    other_user, other_tenant = new_id("u"), new_id("t")
    await idx.put(CAT, BIKE, FACT)
    await idx.put(CAT, user=other_user)
    await idx.put(CAT, tenant=other_tenant)
    assert await idx.index.forget_user(idx.tenant, idx.user) == 3
    assert await idx.index.count(idx.tenant, idx.user) == 0
    assert await idx.find("cat Biscuit") == []
    assert await idx.index.count(idx.tenant, other_user) == 1
    assert await idx.index.count(other_tenant, idx.user) == 1


async def test_tenants_and_users_never_see_each_other(idx: Index) -> None:
    """Same entry ids under two tenants (same user id) and two users: each sees its own."""
    other_user, other_tenant = new_id("u"), new_id("t")
    bike_as_cat_id = entry(CAT.id, BIKE.text)
    await idx.put(CAT)
    await idx.put(bike_as_cat_id, user=other_user)
    await idx.put(bike_as_cat_id, FACT, tenant=other_tenant)
    assert await idx.find("red bicycle tyre") == []
    assert await idx.find("cat Biscuit") == [CAT.id]
    for tenant, user in ((idx.tenant, other_user), (other_tenant, idx.user)):
        hits = await idx.index.search(tenant, user, query("cat Biscuit"), model=MODEL)
        assert hits == []
        digests = await idx.index.digests(tenant, user, "m|")
        assert digests == {CAT.id: bike_as_cat_id.digest}
    assert await idx.index.count(idx.tenant, idx.user) == 1
    assert await idx.index.count(idx.tenant, other_user) == 1
    assert await idx.index.count(other_tenant, idx.user) == 2


async def test_count(idx: Index) -> None:
    """``count`` is the number of the user's entries (0 for a user never indexed)."""
    assert await idx.index.count(idx.tenant, idx.user) == 0
    await idx.put(CAT, BIKE, FACT)
    assert await idx.index.count(idx.tenant, idx.user) == 3


async def test_count_without_vector_is_every_entry_for_another_model(idx: Index) -> None:
    """Entries written with the query's model all have its dense vector (0 without); for a
    query of another model none has (all keyword only); an unindexed user has none."""
    assert await idx.index.count_without_vector(idx.tenant, idx.user, model=MODEL) == 0
    await idx.put(CAT, BIKE, FACT)
    assert await idx.index.count_without_vector(idx.tenant, idx.user, model=MODEL) == 0
    assert await idx.index.count_without_vector(idx.tenant, idx.user, model="other") == 3
    assert await idx.index.count_without_vector(idx.tenant, "nobody", model="other") == 0


async def test_upsert_under_a_stale_erasure_generation_writes_nothing(idx: Index) -> None:
    """An erasure begun or ended since the writer read the mark refuses its write."""
    marks = ErasureMarks(client=idx.redis, keys=idx.keys)
    read = await idx.generation()
    erasure = await marks.begin(idx.tenant, idx.user)
    with pytest.raises(ErasedMeanwhile):
        await idx.put(CAT, erasure=read)
    await marks.end(idx.tenant, idx.user, erasure)
    with pytest.raises(ErasedMeanwhile):
        await idx.put(CAT, erasure=read)
    assert await idx.index.count(idx.tenant, idx.user) == 0
    assert await idx.put(CAT, erasure=await idx.generation()) == 1


async def test_upsert_of_another_embedding_model_is_refused(idx: Index) -> None:
    """Vectors of two models never mix in one user's index; after erasure the new one fits."""
    await idx.put(CAT)
    with pytest.raises(IndexModelMismatch):
        await idx.put(BIKE, model="another-model")
    assert await idx.index.count(idx.tenant, idx.user) == 1
    await idx.index.forget_user(idx.tenant, idx.user)
    assert await idx.put(BIKE, model="another-model") == 1


async def test_search_with_another_model_is_keyword_only(idx: Index) -> None:
    """A query embedded by another model is not compared with the stored vectors."""
    await idx.put(CAT, BIKE)
    text = CAT.embedding_text
    assert await idx.find(text, terms=[], min_score=0.9) == [CAT.id]
    assert await idx.find(text, terms=[], min_score=0.9, model="another-model") == []
    hits = await idx.index.search(idx.tenant, idx.user, query("Biscuit"), model="another-model")
    assert [(h.entry.id, h.dense, h.score) for h in hits] == [(CAT.id, 0.0, 1.0)]


async def test_excluded_sources_are_left_out(idx: Index) -> None:
    """Entries whose source the window already shows are never returned."""
    again = entry("m|c2|e5", "Biscuit the cat slept all day", conversation="c2")
    await idx.put(CAT, again)
    assert set(await idx.find("cat Biscuit")) == {CAT.id, again.id}
    assert await idx.find("cat Biscuit", exclude={CAT.source_id}) == [again.id]


async def test_fused_score_is_in_zero_one(idx: Index) -> None:
    """Every hit scores in (0, 1]; first in both rankings scores 1."""
    await idx.put(CAT, BIKE, FACT, entry("m|c1|e6", "The cat chased a bicycle"))
    hits = await idx.index.search(idx.tenant, idx.user, query("cat Biscuit"), model=MODEL)
    assert hits[0].entry.id == CAT.id
    assert hits[0].score == pytest.approx(1.0)
    assert all(0 < h.score <= 1 for h in hits)


async def test_near_duplicates_collapse(idx: Index) -> None:
    """The same thing said twice is recalled once."""
    first = entry("m|c1|e7", "My order number is 4471.")
    again = entry("m|c2|e8", "my  order number is 4471", conversation="c2")
    await idx.put(first, again, BIKE)
    hits = await idx.find("order number 4471")
    assert len(set(hits) & {first.id, again.id}) == 1


async def test_ranking_is_the_in_memory_reference(idx: Index) -> None:
    """Hits, their order and fused scores are those of ``hybrid_search.search``."""
    corpus = [
        CAT,
        BIKE,
        FACT,
        entry("m|c1|e10", "Biscuit the cat hates the vet"),
        entry("m|c1|e11", "The vet said the cat is healthy and fat"),
        entry("m|c2|e12", "Went cycling by the river with Mel", conversation="c2"),
        entry("m|c2|e13", "Painted a lake at sunrise", conversation="c2"),
        entry("m|c2|e14", "Mel and the cat watched the river", conversation="c2"),
    ]
    reference = await put_with_reference(idx, corpus)
    for text in ("cat vet", "river cycling Mel", "Biscuit", "tea"):
        expected = search(reference, query(text, min_score=0.2))
        found = await idx.index.search(
            idx.tenant, idx.user, query(text, min_score=0.2), model=MODEL
        )
        assert [h.entry.id for h in found] == [h.entry.id for h in expected], text
        assert [h.score for h in found] == pytest.approx([h.score for h in expected]), text
        assert [h.keyword for h in found] == pytest.approx([h.keyword for h in expected], rel=1e-4)


async def test_a_named_speakers_words_rank_first(idx: Index) -> None:
    """A message naming a speaker: of entries matching its words alike, that speaker's rank
    first (the keyword ranking among what the named speaker said joins the fusion)."""
    await idx.put(
        entry("m|c1|e20", "The lake! The lake at dawn"),
        entry(
            "m|c1|e21",
            "We spent a long quiet weekend at a cabin near a lake with friends and the dog",
            speaker="Melanie",
        ),
        entry("m|c1|e22", "I signed up for a pottery class", speaker="Melanie"),
        entry("m|c1|e23", "Pottery is calming", speaker="Melanie"),
        entry("m|c1|e24", "The bowl I made in the pottery class cracked in the kiln yesterday"),
    )
    # without the speaker ranking, the shorter entries of the other speaker would win
    for text, expected in (("Did Melanie go to the lake?", "e21"), ("Caroline's pottery", "e24")):
        hits = await idx.index.search(idx.tenant, idx.user, query(text, vector=None), model=MODEL)
        assert hits[0].entry.id == f"m|c1|{expected}", text


async def test_a_first_person_question_ranks_the_askers_words_first(idx: Index) -> None:
    """A message in the first person names its writer (``SearchQuery.asker``): of entries
    matching its words alike, the user's rank first, and in the order and with the fused
    scores of ``hybrid_search.search``, dense on or off."""
    corpus = [
        entry("m|c1|e25", "Lemon, the classic citrus", speaker="assistant"),
        entry(
            "m|c1|e26",
            "Yesterday I made a cocktail with lemon and the guests asked for the recipe",
            speaker="user",
        ),
        entry("m|c1|e27", "Try orange zest in a lemon cocktail", speaker="assistant"),
        entry("m|c1|e28", "The weather is nice", speaker="user"),
    ]
    reference = await put_with_reference(idx, corpus)
    for vector in (None, hashed_vector("Did I use lemon?")):
        asked = query("Did I use lemon?", vector=vector, min_score=0.2, asker="user")
        hits = await idx.index.search(idx.tenant, idx.user, asked, model=MODEL)
        assert hits[0].entry.id == "m|c1|e26"
        assert ranked(hits) == ranked(search(reference, asked))


async def test_the_words_the_best_entries_share_find_an_entry_without_the_querys(
    idx: Index,
) -> None:
    """Relevance feedback: the message about the puppy's shots says neither "new" nor
    "puppy", but "Biscuit", which the entries the question finds share; it is found, the
    unrelated entries are not, and every index ranks as ``hybrid_search.search``, dense on
    or off (the speakers' names are not such words: everyone here is Caroline)."""
    shots = entry("m|c1|e42", "The vet says Biscuit needs his shots next week")
    corpus = [
        entry("m|c1|e40", "Our new puppy is called Biscuit"),
        entry("m|c1|e41", "Biscuit the puppy chewed every shoe in the flat"),
        shots,
        entry("m|c1|e43", "My sister plays the violin", speaker="Melanie"),
        entry("m|c1|e44", "The train was late again this morning"),
    ]
    reference = await put_with_reference(idx, corpus)
    assert set(shots.terms).isdisjoint(keyword_terms("How is the new puppy?"))
    for vector in (None, hashed_vector("How is the new puppy?")):
        asked = query("How is the new puppy?", vector=vector, min_score=0.9)
        hits = await idx.index.search(idx.tenant, idx.user, asked, model=MODEL)
        assert [h.entry.id for h in hits] == ["m|c1|e40", "m|c1|e41", "m|c1|e42"]
        assert ranked(hits) == ranked(search(reference, asked))
        # found by feedback's words alone, and recalled: its feedback score says why
        assert (hits[2].keyword, hits[2].dense) == (0.0, 0.0)
        assert hits[2].feedback > 0
        assert hits[2].feedback == pytest.approx(search(reference, asked)[2].feedback, rel=1e-4)


CAMPING = entry(
    "m|c3|e30",
    "We went camping by the lake. The kids watched the meteor shower all night. Then it rained.",
    conversation="c3",
)


async def test_an_entry_is_found_by_its_best_sentence(idx: Index) -> None:
    """An entry of several sentences scores the best cosine among its own embedding and its
    sentences' (dense alone here: no keyword terms); written again as one sentence, its
    old sentences' embeddings no longer match."""
    await idx.put(CAMPING, BIKE)
    sentence = hashed_vector("Caroline: The kids watched the meteor shower all night.")
    whole = hashed_vector(CAMPING.embedding_text)
    assert float(sentence @ whole) < 0.9
    dense_only = {"vector": sentence, "terms": [], "min_score": 0.99}
    hits = await idx.index.search(idx.tenant, idx.user, query("", **dense_only), model=MODEL)
    assert [h.entry.id for h in hits] == [CAMPING.id]
    assert hits[0].dense == pytest.approx(1.0, abs=1e-3)
    shorter = entry(CAMPING.id, "We went camping by the lake.", conversation="c3")
    assert await idx.put(shorter) == 1
    assert await idx.index.search(idx.tenant, idx.user, query("", **dense_only), model=MODEL) == []


DATED = [
    replace(entry(f"m|c{n}|d{n}", text, conversation=f"c{n}"), date=f"{day}T10:00:00+07:00")
    for n, (text, day) in enumerate(
        (
            ("We cooked pasta for dinner with the neighbours and their dog", "2023-01-10"),
            ("We cooked a curry for dinner", "2023-02-10"),
            (
                "Dinner was a cooked soup again, my sister cooked it with lentils and bread",
                "2023-03-10",
            ),
            ("My sister came over for a late dinner, the kids loved the spicy curry", "2023-05-24"),
            ("Yesterday I signed up for a class of pottery", "2023-03-03"),
            ("I signed up for the pottery class, the pottery class is so relaxing", "2023-03-02"),
        )
    )
]


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "keyword-only"])
async def test_time_rankings_are_the_in_memory_reference(idx: Index, dense: bool) -> None:
    """Periods the message names and when-questions rank as ``hybrid_search.search`` ranks
    them, with dense search on or off (texts of different lengths: no ties, whose order is
    each index's own)."""
    reference = await put_with_reference(idx, DATED)
    asked = datetime.fromisoformat("2023-05-30T20:00:00+07:00")
    for text, moves in (
        ("What did we cook for dinner last week?", True),
        ("What did we have for dinner in February 2023?", False),
        ("When did I sign up for the pottery class?", True),
    ):
        timed = query(
            text,
            min_score=0.2,
            periods=periods(text, asked),
            asks_when=asks_when(text),
            **({} if dense else {"vector": None}),
        )
        assert timed.periods or timed.asks_when, text
        expected = search(reference, timed)
        untimed = search(reference, replace(timed, periods=(), asks_when=False))
        assert ([h.entry.id for h in expected] != [h.entry.id for h in untimed]) is moves, text
        found = await idx.index.search(idx.tenant, idx.user, timed, model=MODEL)
        assert [h.entry.id for h in found] == [h.entry.id for h in expected], text
        assert [h.score for h in found] == pytest.approx([h.score for h in expected]), text


async def test_a_message_that_asks_several_questions_ranks_as_the_reference(idx: Index) -> None:
    """Each question of a compound message searched on its own (its dense ranking holding
    its nearest entry whatever the minimum, its keywords), fused apart from the message's:
    the hits, their order and fused scores are those of ``hybrid_search.search``."""
    corpus = [
        CAT,
        BIKE,
        FACT,
        entry("m|c1|e10", "Biscuit the cat hates the vet"),
        entry("m|c2|e12", "Went cycling by the river with Mel", conversation="c2"),
        entry("m|c2|e13", "Painted a lake at sunrise", conversation="c2"),
        entry("m|c2|e14", "My budget for the new bike is 300 baht", conversation="c2"),
    ]
    reference = await put_with_reference(idx, corpus)
    asked = "remind me: what is my cat called, and what is my budget?"
    parts = tuple(  # the nearest alone, over a minimum none reaches: hashed vectors tie at 0
        query(part, min_score=0.95, nearest=1) for part in ("what is my cat called", "my budget?")
    )
    compound = replace(query(asked, min_score=0.2), parts=parts)
    expected = search(reference, compound)
    found = await idx.index.search(idx.tenant, idx.user, compound, model=MODEL)
    assert ranked(found) == ranked(expected)
    assert [h.score for h in found] == pytest.approx([h.score for h in expected])
    assert {"m|c1|e1", "m|c2|e14"} <= {h.entry.id for h in found}


async def test_a_part_without_words_ranks_as_the_reference(idx: Index) -> None:
    """The ``across`` part of a message (its vector alone, no terms: the message embedded
    for texts of another script) ranks as in ``hybrid_search.search``, and brings the
    entry nearest to it that nothing else found."""
    corpus = [CAT, BIKE, FACT, entry("m|c2|e13", "Painted a lake at sunrise", conversation="c2")]
    reference = await put_with_reference(idx, corpus)
    across = query("Painted a lake at sunrise", terms=(), min_score=0.45, nearest=1)
    asked = replace(query("what did I adopt?", min_score=0.95), parts=(across,))
    expected = search(reference, asked)
    found = await idx.index.search(idx.tenant, idx.user, asked, model=MODEL)
    assert ranked(found) == ranked(expected)
    assert "m|c2|e13" in {h.entry.id for h in found}


async def put_with_reference(idx: Index, corpus: Sequence[IndexEntry]) -> IndexSnapshot:
    """``corpus`` written to the index under test, and the in-memory reference of it."""
    await idx.put(*corpus)
    reference = IndexSnapshot()
    reference.upsert((e, hashed_vectors(e)) for e in corpus)
    return reference


def ranked(hits: Sequence[SearchHit]) -> list[tuple[str, float, float]]:
    """Each hit's entry, fused score and cosine, rounded as two indexes agree on them."""
    return [(h.entry.id, round(h.score, 4), round(h.dense, 3)) for h in hits]


async def test_an_entry_only_a_position_reached_is_recalled_by_no_index(idx: Index) -> None:
    """An entry that only a question's nearest few or a named period placed in a ranking
    (no keyword match, a cosine under the minimum) is recalled by no index; one a
    question's own scores found (its words, or a cosine over its own minimum) is, and every
    index recalls what ``hybrid_search.search`` recalls."""
    train = replace(
        entry("m|c9|t1", "The train was late again this morning", conversation="c9"),
        date="2023-05-25T10:00:00+07:00",
    )
    reference = await put_with_reference(idx, [*DATED, train])
    asked = datetime.fromisoformat("2023-05-30T20:00:00+07:00")
    text = "What did we cook last week?"
    # the period ranks the train first (cosine 0.5: no ties), under the minimum
    near_train = hashed_vector("the morning")
    timed = query(text, vector=near_train, min_score=0.6, periods=periods(text, asked))
    assert timed.periods
    expected = search(reference, timed)
    found = await idx.index.search(idx.tenant, idx.user, timed, model=MODEL)
    assert [h.entry.id for h in found] == [h.entry.id for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected])
    assert train.id not in {h.entry.id for h in found}
    assert all(h.keyword > 0 or h.dense > 0 or h.feedback > 0 for h in found)
    # a question's nearest few under its minimum: placed, not recalled
    nearest = query("the train this morning", terms=(), min_score=0.999, nearest=1)
    compound = replace(query("what did we cook?", min_score=0.999), parts=(nearest,))
    expected = search(reference, compound)
    found = await idx.index.search(idx.tenant, idx.user, compound, model=MODEL)
    assert ranked(found) == ranked(expected)
    assert train.id not in {h.entry.id for h in found}
    # the same question with a minimum its cosine reaches: found by it, recalled
    reaching = replace(compound, parts=(replace(nearest, min_score=0.2),))
    expected = search(reference, reaching)
    found = await idx.index.search(idx.tenant, idx.user, reaching, model=MODEL)
    assert ranked(found) == ranked(expected)
    assert train.id in {h.entry.id for h in found}
