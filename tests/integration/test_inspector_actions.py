"""The inspector's actions on real Redis and RabbitMQ: correct a fact (it is superseded with
provenance operator, the index follows), remove a fact, replay dead letters by code (through
``llm-bot dlq replay``'s code); each behind a confirmation and the CSRF token, audited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aio_pika
import httpx
import pytest
from structlog.testing import capture_logs

from llm_bot.adapters.rabbit_dlq import ReplayFailed
from llm_bot.adapters.rabbit_topology import Topology, declare_topology
from llm_bot.config import Settings
from llm_bot.inspector import actions
from llm_bot.inspector.access_keys import key_digest
from llm_bot.inspector.wiring import Inspector
from llm_bot.memory.long_term import SemanticFact
from llm_bot.memory.recall_items import LONG_TERM_PREFIX, long_term_entry_id
from tests.support.events import message_event, new_id
from tests.support.harness import bot, integrator
from tests.support.inspector import (
    PLANTED,
    Seeded,
    client_for,
    csrf_of,
    inspector_for,
    inspector_settings,
    login,
    seed_user,
)
from tests.support.services import ServiceUrls

pytestmark = pytest.mark.integration

KEY_ALL, KEY_TENANT = "actions-all-key", "actions-tenant-key"
CORRECTED = "The user lives in Lamphun."


@pytest.fixture
async def seeded(service_urls: ServiceUrls) -> AsyncIterator[tuple[Inspector, Seeded]]:
    async with inspector_settings(service_urls, f"*={key_digest(KEY_ALL)}") as settings:
        user = await seed_user(settings)
        async with inspector_for(settings) as inspector:
            yield inspector, user


async def planted_fact(inspector: Inspector, user: Seeded) -> SemanticFact:
    facts = await inspector.ltm.facts(user.tenant_id, user.user_id)
    return next(f for f in facts if f.fact == PLANTED)


async def indexed_facts(inspector: Inspector, user: Seeded) -> set[str]:
    digests = await inspector.base.index.digests(user.tenant_id, user.user_id, LONG_TERM_PREFIX)
    return set(digests)


def actions_done(inspector: Inspector, action: str, outcome: str = "done") -> float | None:
    return inspector.metrics.registry.get_sample_value(
        "llmbot_inspector_actions_total", {"action": action, "outcome": outcome}
    )


async def test_a_correction_supersedes_the_fact_with_provenance_operator(
    seeded: tuple[Inspector, Seeded],
) -> None:
    """The form, then a confirmation naming the old and new value (nothing written yet),
    then the new value is the current fact (source: operator), the old one superseded by it
    and out of the retrieval index, the new one in it; audited once."""
    inspector, user = seeded
    old = await planted_fact(inspector, user)
    assert long_term_entry_id("facts", old.id) in await indexed_facts(inspector, user)
    url = f"/t/{user.tenant_id}/u/{user.user_id}/f/{old.id}/correct"
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        form = await client.get(url)
        assert PLANTED in form.text
        csrf = csrf_of(form.text)
        assert (await client.post(url, data={"value": CORRECTED})).status_code == 403
        review = await client.post(url, data={"value": CORRECTED, "csrf": csrf})
        assert review.status_code == 200
        assert PLANTED in review.text
        assert CORRECTED in review.text
        assert 'name="confirmed" value="yes"' in review.text
        assert (await planted_fact(inspector, user)).superseded_by is None  # not yet
        done = await client.post(url, data={"value": CORRECTED, "csrf": csrf, "confirmed": "yes"})
        assert done.status_code == 200
        assert 'id="done"' in done.text
        shown = await client.get(f"/t/{user.tenant_id}/u/{user.user_id}", params={"format": "json"})
    facts = {f.fact: f for f in await inspector.ltm.facts(user.tenant_id, user.user_id)}
    new = facts[CORRECTED]
    assert new.superseded_by is None
    assert [s.provenance for s in new.sources] == ["operator"]
    assert facts[PLANTED].superseded_by == new.id
    indexed = await indexed_facts(inspector, user)
    assert long_term_entry_id("facts", new.id) in indexed
    assert long_term_entry_id("facts", old.id) not in indexed
    rows = {f["value"]: f for f in shown.json()["facts"]}
    assert rows[CORRECTED]["replaced"][0]["value"] == PLANTED
    assert rows[CORRECTED]["sources"][0]["provenance"] == "operator"
    assert actions_done(inspector, "correct_fact") == 1.0


async def test_a_correction_to_an_empty_value_is_refused_before_any_write(
    seeded: tuple[Inspector, Seeded],
) -> None:
    """A blank value is refused (409, the reason on the form); the fact stays current."""
    inspector, user = seeded
    old = await planted_fact(inspector, user)
    url = f"/t/{user.tenant_id}/u/{user.user_id}/f/{old.id}/correct"
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        csrf = csrf_of((await client.get(url)).text)
        refused = await client.post(url, data={"value": "  ", "csrf": csrf, "confirmed": "yes"})
    assert refused.status_code == 409
    assert "empty" in refused.text
    assert (await planted_fact(inspector, user)).superseded_by is None
    assert actions_done(inspector, "correct_fact") is None


async def test_removing_a_fact_takes_it_out_of_memory_and_the_index(
    seeded: tuple[Inspector, Seeded],
) -> None:
    """The confirmation names the fact; without the CSRF token nothing goes; with it the
    fact is gone from long-term memory, the page and the index; audited once."""
    inspector, user = seeded
    fact = await planted_fact(inspector, user)
    base = f"/t/{user.tenant_id}/u/{user.user_id}"
    url = f"{base}/f/{fact.id}/remove"
    async with client_for(inspector) as client:
        await login(client, KEY_ALL)
        confirm = await client.get(url)
        assert PLANTED in confirm.text
        assert (await client.post(url, data={"csrf": "wrong"})).status_code == 403
        assert await planted_fact(inspector, user) == fact
        done = await client.post(url, data={"csrf": csrf_of(confirm.text)})
        assert done.status_code == 200
        page = (await client.get(base, params={"format": "json"})).json()
        assert (await client.get(url)).status_code == 404  # no longer a current fact
    assert PLANTED not in {f["value"] for f in page["facts"]}
    remaining = await inspector.ltm.facts(user.tenant_id, user.user_id)
    assert fact.id not in {f.id for f in remaining}
    assert long_term_entry_id("facts", fact.id) not in await indexed_facts(inspector, user)
    assert actions_done(inspector, "remove_fact") == 1.0


async def test_dead_letters_are_listed_by_code_and_replayed_through_the_ingress(
    service_urls: ServiceUrls,
) -> None:
    """The DLQ page counts dead letters by code (only for a key of every tenant); replaying
    a code none has moves nothing; replaying theirs sends them back through the ingress
    (the service refuses them again, so they return); each replay audited."""
    keys = f"*={key_digest(KEY_ALL)},tdlqi={key_digest(KEY_TENANT)}"
    async with inspector_settings(service_urls, keys) as settings:
        bad = message_event(tenant="tdlqi", user=new_id("u"), conversation=new_id("c"), text="x")
        bad["type"] = "shout"
        async with bot(settings) as (_service, client), inspector_for(settings) as inspector:
            await client.publish(b'{"schema": "internal.event.v2", "id": ')
            await client.publish(bad)
            assert (await client.next_error()).body["event_id"] == bad["id"]
            async with client_for(inspector) as http:
                await login(http, KEY_TENANT)
                assert (await http.get("/dlq")).status_code == 404
                await login(http, KEY_ALL)
                codes = await dlq_codes(http, settings, expected=2)
                assert codes == {"invalid_event": 2}
                url = "/dlq/events/replay"
                confirm = await http.get(url, params={"code": "invalid_event"})
                assert settings.dlq in confirm.text
                assert (await http.get(url, params={"code": "bad code"})).status_code == 404
                csrf = csrf_of(confirm.text)
                assert (await http.post(url, params={"code": "invalid_event"})).status_code == 403
                none = await http.post(
                    url, params={"code": "model_error", "format": "json"}, data={"csrf": csrf}
                )
                assert (none.json()["replayed"], none.json()["left"]) == (0, 2)
                done = await http.post(
                    url,
                    params={"code": "invalid_event", "format": "json"},
                    data={"csrf": csrf},
                )
                assert done.status_code == 200
                assert done.json()["replayed"] == 2
                again = await client.next_error()  # back through the ingress, invalid again
                assert again.body["event_id"] == bad["id"]
                assert await dlq_codes(http, settings, expected=2) == {"invalid_event": 2}
            assert actions_done(inspector, "replay_dead_letters") == 2.0


async def test_a_replay_that_fails_is_audited_as_failed(service_urls: ServiceUrls) -> None:
    """With no queue bound to the ingress key the republish is returned: the replay raises
    ``ReplayFailed``, the dead letter stays, and the audit event and the counter record a
    failed replay (outcome, the count replayed, the error's type; never a body)."""
    async with (
        inspector_settings(service_urls, f"*={key_digest(KEY_ALL)}") as settings,
        integrator(settings) as client,
        inspector_for(settings) as inspector,
    ):
        topology = await declare_topology(client.channel, Topology.from_settings(settings.broker))
        await client.channel.queue_delete(settings.ingress_queue)
        await topology.dlx.publish(
            aio_pika.Message(b'{"secret": "body"}', headers={"x-error-code": "internal"}),
            routing_key=settings.ingress_routing_key,
        )
        async with asyncio.timeout(10):  # until the dead letter is in the DLQ
            while await client.queue_depth(settings.dlq) != 1:
                await asyncio.sleep(0.05)
        scope = inspector.keys.entries[0][0]
        replay = actions.replay_dead_letters_by_code(inspector, scope, "events", "internal")
        with capture_logs() as logs, pytest.raises(ReplayFailed, match="returned"):
            await replay
        assert await client.queue_depth(settings.dlq) == 1
    [audit] = [entry for entry in logs if entry["event"] == "inspector.action"]
    assert audit["action"] == "replay_dead_letters"
    assert (audit["outcome"], audit["replayed"], audit["error"]) == ("failed", 0, "ReplayFailed")
    assert (audit["queue"], audit["code"], audit["key"]) == ("events", "internal", scope.name)
    assert "secret" not in repr(audit)
    assert actions_done(inspector, "replay_dead_letters", "failed") == 1.0
    assert actions_done(inspector, "replay_dead_letters") is None


async def dlq_codes(
    http: httpx.AsyncClient, settings: Settings, *, expected: int
) -> dict[str, int]:
    """The events DLQ's codes once it holds ``expected`` dead letters (polled)."""
    for _ in range(200):
        data = (await http.get("/dlq", params={"format": "json"})).json()
        [events] = [q for q in data["queues"] if q["queue"] == "events"]
        if events["depth"] == expected:
            assert events["name"] == settings.dlq
            return {c["code"]: c["count"] for c in events["codes"]}
        await asyncio.sleep(0.05)
    raise AssertionError(f"the DLQ never held {expected} dead letters")
