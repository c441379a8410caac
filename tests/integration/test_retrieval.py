"""Retrieval end to end (SPEC 5.7): the worker indexes what was said, ``recall`` searches it,
filler skips the search, topics reuse their selection, erasure takes the entries along."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest
from prometheus_client import CollectorRegistry

from llm_bot.bootstrap import Service, utc_now
from llm_bot.config import Settings
from llm_bot.entrypoints.recall_cli import reindex, show_recall
from llm_bot.fake_model import FakeModelServer
from llm_bot.fake_model.memory_prompts import memory_responder
from llm_bot.memory.conversation_key import ConversationKey
from llm_bot.memory.search_query import SearchQuery
from llm_bot.memory.topic import reused
from llm_bot.memory.topic_state import RecalledRecord
from llm_bot.memory.working import WorkingMemory
from llm_bot.service.indexer import Indexer
from tests.integration.test_memory_worker import say, settled
from tests.support.events import message_event, new_id
from tests.support.harness import Integrator, bot, running_worker, settings_for_test
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration


@pytest.fixture
async def memory_model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer(responder=memory_responder) as server:
        yield server


@pytest.fixture
def retrieval_settings(
    service_urls: ServiceUrls, memory_model: FakeModelServer
) -> Callable[..., Settings]:
    def factory(**overrides: object) -> Settings:
        values: dict[str, object] = {"retry_base_seconds": 0.05}
        values.update(overrides)
        return settings_for_test(service_urls, memory_model.base_url, **values)

    return factory


def searches(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("llmbot_retrieval_searches_total", {"outcome": outcome}) or 0.0


async def forget(client: Integrator, key: ConversationKey, conversation: str = "*") -> None:
    event = message_event(
        tenant=key.tenant_id,
        user=key.user_id,
        conversation=conversation,
        text=None,
        event_type="memory.forget",
    )
    await client.publish(event)


async def until(condition: Callable[[], Awaitable[bool]], within: float) -> None:
    """Poll ``condition`` every 50 ms until it holds; fail after ``within`` seconds."""
    async with asyncio.timeout(within):
        while not await condition():
            await asyncio.sleep(0.05)


HISTORY = (
    "My order number is 4471 and it has not arrived yet.",
    "I prefer deliveries on weekends because I work during the week.",
    "ok",
)


async def test_every_message_is_indexed_once_and_filler_is_not(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """Each user and assistant message becomes one entry when its turn's job runs; running
    the indexer again writes nothing; filler ("ok") is not worth an entry."""
    settings = retrieval_settings()
    key = ConversationKey("tri", new_id("u"), new_id("c"))
    async with bot(settings) as (_service, client), running_worker(settings) as worker:
        for text in HISTORY:
            await say(client, key, text)
        await settled(client)
        index = worker.base.index
        assert await index.count(key.tenant_id, key.user_id) == 5  # 2 user + 3 echo replies
        assert worker.base.embedder is not None
        indexer = Indexer(
            progress=worker.progress,
            ltm=worker.ltm,
            index=index,
            embedder=worker.base.embedder,
            metrics=worker.metrics,
            clock=utc_now,
        )
        erasure = await worker.progress.erasure(key.tenant_id, key.user_id)
        assert await indexer.index_messages(key, erasure=erasure) == 0
        await worker.progress.reset_indexed(key)
        assert await indexer.index_messages(key, erasure=erasure) == 0  # same digests
        assert await index.count(key.tenant_id, key.user_id) == 5


async def test_a_new_conversation_recalls_what_the_user_said_before(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """After the first conversation is indexed, a question in a new conversation of the same
    user finds the old message (and another user's memory is never searched)."""
    registry = CollectorRegistry()
    settings = retrieval_settings()
    first = ConversationKey("trn", new_id("u"), new_id("c"))
    async with (
        bot(settings, registry=registry) as (service, client),
        running_worker(settings) as _worker,
    ):
        for text in HISTORY:
            await say(client, first, text)
        await settled(client)
        later = ConversationKey(first.tenant_id, first.user_id, new_id("c"))
        await say(client, later, "What was my order number again?")
        assert searches(registry, "searched") >= 1
        stranger = ConversationKey(first.tenant_id, new_id("u"), new_id("c"))
        await say(client, stranger, "What was my order number again?")
        memory = await service.store.working_memory(later)
        other = await service.store.working_memory(stranger)
        assert memory is not None
        recalled = await _recalled(service, later, memory)
    assert any("4471" in record.text for record in recalled)
    assert other is not None
    assert other.topic is None or not other.topic.recalled


async def test_filler_skips_retrieval_and_topic_reuse_keeps_the_selection(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """ "ok" and "555" skip the search without a model call; a message on the same topic
    reuses the last selection unchanged (no search); a new topic searches again."""
    registry = CollectorRegistry()
    settings = retrieval_settings(topic_similarity=0.8)
    key = ConversationKey("trt", new_id("u"), new_id("c"))
    async with (
        bot(settings, registry=registry) as (service, client),
        running_worker(settings) as _worker,
    ):
        for text in HISTORY:
            await say(client, key, text)
        await settled(client)
        fresh = ConversationKey(key.tenant_id, key.user_id, new_id("c"))
        await say(client, fresh, "Where is my order 4471?")
        first = await service.store.working_memory(fresh)
        searched = searches(registry, "searched")
        for filler in ("ok", "555", "ครับ"):
            await say(client, fresh, filler)
        assert searches(registry, "filler_skip") >= 3
        await say(client, fresh, "Where is my order 4471 now?")
        assert searches(registry, "topic_reuse") == 1
        reused = await service.store.working_memory(fresh)
        await say(client, fresh, "Do you sell garden furniture in teak?")
        assert searches(registry, "searched") == searched + 1
    assert first is not None
    assert first.topic is not None
    assert reused is not None
    assert reused.topic is not None
    assert reused.topic.recalled == first.topic.recalled
    assert reused.topic.scores == first.topic.scores
    assert reused.topic.size == 2


async def test_erasure_removes_the_index_entries(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """memory.forget of one conversation removes its entries only; of the user, all."""
    settings = retrieval_settings()
    key = ConversationKey("tre", new_id("u"), new_id("c"))
    other = ConversationKey(key.tenant_id, key.user_id, new_id("c"))
    async with bot(settings) as (_service, client), running_worker(settings) as worker:
        await say(client, key, HISTORY[0])
        await say(client, other, HISTORY[1])
        await settled(client)
        index = worker.base.index
        assert await index.count(key.tenant_id, key.user_id) == 4
        await forget(client, key, key.conversation_id)

        async def conversation_gone() -> bool:
            entries = await index.digests(key.tenant_id, key.user_id, "")
            return all(key.conversation_id not in entry for entry in entries)

        # a forget runs beside other conversations' events: poll for it, with a deadline
        await until(conversation_gone, within=15)
        await settled(client)
        remaining = await index.digests(key.tenant_id, key.user_id, "")
        assert remaining
        assert all(key.conversation_id not in entry for entry in remaining)
        await forget(client, key)

        async def user_gone() -> bool:
            return await index.count(key.tenant_id, key.user_id) == 0

        await until(user_gone, within=15)


async def test_retrieval_off_searches_nothing(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """LLM_BOT_EMBEDDINGS=off: no embedder, no index writes, no searches."""
    registry = CollectorRegistry()
    settings = retrieval_settings(embeddings="off")
    key = ConversationKey("tro", new_id("u"), new_id("c"))
    async with (
        bot(settings, registry=registry) as (_service, client),
        running_worker(settings) as worker,
    ):
        await say(client, key, HISTORY[0])
        await settled(client)
        assert worker.base.embedder is None
        assert await worker.base.index.count(key.tenant_id, key.user_id) == 0
    assert searches(registry, "searched") == 0
    assert searches(registry, "off") == 1


async def test_reindex_backfills_memory_recorded_before_retrieval_and_show_lists_it(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """Memory recorded with retrieval off has no index; ``llm-bot memory reindex`` builds it
    (once: a second run writes nothing) and ``memory show --query`` lists what a message
    would recall, best first."""
    off = retrieval_settings(embeddings="off")
    key = ConversationKey("trx", new_id("u"), new_id("c"))
    async with bot(off) as (_service, client), running_worker(off) as _worker:
        for text in HISTORY:
            await say(client, key, text)
        await settled(client)
    on = retrieval_settings()
    written = await reindex(on, tenant_id=key.tenant_id, user_id=key.user_id, rebuild=False)
    again = await reindex(on, tenant_id=key.tenant_id, user_id=key.user_id, rebuild=False)
    rebuilt = await reindex(on, tenant_id=key.tenant_id, user_id=key.user_id, rebuild=True)
    later = ConversationKey(key.tenant_id, key.user_id, new_id("c"))
    hits = await show_recall(on, later, "what is my order number?")
    assert written == 5
    assert again == 0
    assert rebuilt == 5
    assert "4471" in hits[0]["text"]
    assert hits[0]["score"] >= hits[-1]["score"]
    assert {"dense", "keyword", "date", "speaker", "conversation_id"} <= set(hits[0])


async def test_thai_is_recalled_by_its_keywords(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """The English embedding model cannot read Thai (no vector); Thai character bigrams
    still find a Thai message for a Thai question, ranked above an unrelated Thai one."""
    selection = await recalled_later(
        retrieval_settings(),
        said=("กาต้มน้ำสีฟ้าราคา 250 บาทค่ะ ส่งฟรีวันเสาร์", "วันนี้อากาศดีมาก ฉันไปเดินเล่นที่สวน"),
        asked=("กาต้มน้ำสีฟ้าราคาเท่าไหร่",),
    )
    ranked = sorted(selection, key=lambda record: -record.score)
    assert "กาต้มน้ำ" in ranked[0].text
    weather = [r.score for r in ranked if "อากาศ" in r.text and "กาต้มน้ำ" not in r.text]
    assert all(score < ranked[0].score for score in weather)


async def test_an_english_question_in_a_thai_conversation_recalls_a_thai_message(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """In a conversation written in Thai, an English question is also embedded by the
    multilingual model: the Thai message that answers it, which shares no word with it, is
    recalled by that vector (``Retriever.reach_across``)."""
    selection = await recalled_later(
        retrieval_settings(),
        said=("อ้อ ฉันชื่อแอนนะคะ", "วันนี้อากาศดีมาก ฉันไปเดินเล่นที่สวน"),
        asked=("ขอถามหน่อยค่ะ", "What is my name?"),
    )
    assert any("แอน" in record.text for record in selection)


async def recalled_later(
    settings: Settings, *, said: Sequence[str], asked: Sequence[str]
) -> tuple[RecalledRecord, ...]:
    """A user says ``said`` in one conversation (the worker indexes it), then ``asked`` in
    a new one: what the last message of the new one recalled (its topic's selection)."""
    key = ConversationKey("trth", new_id("u"), new_id("c"))
    async with bot(settings) as (service, client), running_worker(settings) as _worker:
        for text in said:
            await say(client, key, text)
        await settled(client)
        later = ConversationKey(key.tenant_id, key.user_id, new_id("c"))
        for text in asked:
            await say(client, later, text)
        memory = await service.store.working_memory(later)
        assert memory is not None
        return await _recalled(service, later, memory)


async def _recalled(
    service: Service, key: ConversationKey, memory: WorkingMemory
) -> tuple[RecalledRecord, ...]:
    """What the conversation's topic recalled, read back from the index as a reuse does
    (working memory keeps the entries' ids and scores)."""
    assert memory.topic is not None
    topic = memory.topic
    found = await service.base.index.lookup(key.tenant_id, key.user_id, topic.recalled)
    assert len(found) == len(topic.recalled)  # nothing erased here: every id reads back
    return reused(topic.picks, found)


async def test_the_worker_embeds_each_sentence_of_a_message(
    retrieval_settings: Callable[..., Settings],
) -> None:
    """A message of several sentences is stored with its own embedding and each sentence's;
    a query that is one of its sentences finds it by that sentence's cosine alone."""
    settings = retrieval_settings()
    key = ConversationKey("trs", new_id("u"), new_id("c"))
    text = "We went camping by the lake. The kids watched the meteor shower all night."
    async with bot(settings) as (_service, client), running_worker(settings) as worker:
        await say(client, key, text)
        await settled(client)
        embedder = worker.base.embedder
        assert embedder is not None
        (vector,) = await embedder.embed(
            ["user: The kids watched the meteor shower all night."], purpose="query"
        )
        query = SearchQuery(vector=vector, terms=[], min_score=0.99)
        hits = await worker.base.index.search(
            key.tenant_id, key.user_id, query, model=embedder.name
        )
    assert [h.entry.text for h in hits] == [text]
    assert hits[0].dense == pytest.approx(1.0, abs=0.01)
