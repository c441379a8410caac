"""Redis key layout (SPEC 5.8): tenant isolation, exact user patterns, one hash tag per user."""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase

import pytest

from llm_bot.adapters.redis_keys import RedisKeys
from llm_bot.memory.conversation_key import ConversationKey

KEYS = RedisKeys()


def all_keys(tenant: str, user: str, conversation: str = "conv1", event: str = "evt1") -> set[str]:
    """Every key the builder makes for one user (one conversation, one event)."""
    key = ConversationKey(tenant, user, conversation)
    return {
        KEYS.working_memory(key),
        KEYS.conversation_meta(key),
        KEYS.raw_trace(key),
        KEYS.processed_event(key, event),
        *KEYS.conversation_keys(key),
    }


def hash_tag(key: str) -> str:
    """The part of a key Redis Cluster hashes: between the first '{' and the next '}'."""
    start = key.index("{")
    end = key.index("}", start + 1)
    assert end > start + 1, f"empty hash tag in {key!r}"
    return key[start + 1 : end]


def test_colons_in_ids_cannot_make_two_users_collide() -> None:
    """Keys of tenant 'a:b' / user 'c' differ from those of tenant 'a' / user 'b:c'."""
    first = all_keys("a:b", "c")
    second = all_keys("a", "b:c")

    assert first.isdisjoint(second)
    assert KEYS.user_scope("a:b", "c") != KEYS.user_scope("a", "b:c")
    assert {hash_tag(k) for k in first} != {hash_tag(k) for k in second}


def test_same_user_id_in_two_tenants_gets_different_keys() -> None:
    """A user id that exists in two tenants has separate keys in each."""
    assert all_keys("shop1", "u1").isdisjoint(all_keys("shop2", "u1"))


def test_keys_are_namespaced_by_prefix_and_tenant() -> None:
    """Every key starts with 'llmbot:{<tenant>|' (SPEC 5.8 namespace)."""
    for key in all_keys("store_001", "user123"):
        assert key.startswith("llmbot:{store_001|user123}:")


@pytest.mark.parametrize(
    ("tenant", "user", "other_tenant", "other_user"),
    [
        ("t1", "u1", "t1", "u2"),
        ("t1", "u1", "t1", "u10"),
        ("t1", "u1", "t1", "u1.x"),
        ("t1", "u1", "t2", "u1"),
        ("t1", "u1", "t10", "u1"),
        ("a", "b:c", "a:b", "c"),
        ("a:b", "c", "a", "b:c"),
        ("t1", "u1", "t1:u1", "x"),
        ("t1", "u1", "t1", "u1:x"),
    ],
)
def test_user_pattern_matches_only_that_user(
    tenant: str, user: str, other_tenant: str, other_user: str
) -> None:
    """user_pattern matches all of one user's keys and none of another user's or tenant's."""
    pattern = KEYS.user_pattern(tenant, user)

    assert all(fnmatchcase(key, pattern) for key in all_keys(tenant, user))
    for key in all_keys(other_tenant, other_user):
        assert not fnmatchcase(key, pattern), (pattern, key)


def test_tenant_pattern_matches_only_that_tenant() -> None:
    """tenant_pattern matches every user of one tenant and nothing of other tenants."""
    pattern = KEYS.tenant_pattern("t1")

    assert all(fnmatchcase(k, pattern) for k in all_keys("t1", "u1") | all_keys("t1", "u2"))
    for tenant in ("t10", "t1:x", "x:t1", "t2"):
        assert not any(fnmatchcase(k, pattern) for k in all_keys(tenant, "u1")), tenant


def test_all_keys_of_a_user_share_one_hash_tag() -> None:
    """All keys of one tenant + user, across conversations, share one Redis Cluster hash tag."""
    keys = all_keys("store_001", "user123", "c1", "e1") | all_keys(
        "store_001", "user123", "c2", "e2"
    )

    assert {hash_tag(key) for key in keys} == {"store_001|user123"}


def test_different_users_have_different_hash_tags() -> None:
    """Two users of a tenant are in different hash tags (spread across the cluster)."""
    assert hash_tag(KEYS.user_scope("t", "u1")) != hash_tag(KEYS.user_scope("t", "u2"))


def test_conversation_keys_are_distinct_per_conversation() -> None:
    """Two conversations of one user never share a memory key."""
    first = set(KEYS.conversation_keys(ConversationKey("t", "u", "c1")))
    second = set(KEYS.conversation_keys(ConversationKey("t", "u", "c2")))

    assert len(first) == 3
    assert first.isdisjoint(second)


def test_custom_prefix_is_used() -> None:
    """A custom prefix namespaces every key and pattern."""
    keys = RedisKeys(prefix="test-1")
    key = ConversationKey("t", "u", "c")

    assert keys.working_memory(key).startswith("test-1:{t|u}:")
    assert keys.user_pattern("t", "u") == "test-1:{t|u}:*"


BAD_IDS = ["", ".x", "a" * 129, "a/b", "a{b", "a}b", "a|b", "a*", "*", "a?", "a[b]", "a b", "é"]

BUILDERS: dict[str, Callable[[str], object]] = {
    "user_scope/tenant": lambda bad: KEYS.user_scope(bad, "u"),
    "user_scope/user": lambda bad: KEYS.user_scope("t", bad),
    "user_pattern/tenant": lambda bad: KEYS.user_pattern(bad, "u"),
    "user_pattern/user": lambda bad: KEYS.user_pattern("t", bad),
    "tenant_pattern": KEYS.tenant_pattern,
    "working_memory/tenant": lambda bad: KEYS.working_memory(ConversationKey(bad, "u", "c")),
    "working_memory/user": lambda bad: KEYS.working_memory(ConversationKey("t", bad, "c")),
    "working_memory/conv": lambda bad: KEYS.working_memory(ConversationKey("t", "u", bad)),
    "conversation_meta/conv": lambda bad: KEYS.conversation_meta(ConversationKey("t", "u", bad)),
    "raw_trace/conv": lambda bad: KEYS.raw_trace(ConversationKey("t", "u", bad)),
    "conversation_keys/conv": lambda bad: KEYS.conversation_keys(ConversationKey("t", "u", bad)),
    "processed_event/event": lambda bad: KEYS.processed_event(ConversationKey("t", "u", "c"), bad),
    "processed_event/user": lambda bad: KEYS.processed_event(ConversationKey("t", bad, "c"), "e"),
}


@pytest.mark.parametrize("builder", BUILDERS.values(), ids=BUILDERS.keys())
@pytest.mark.parametrize("bad", BAD_IDS)
def test_invalid_ids_raise_before_a_key_is_built(
    builder: Callable[[str], object], bad: str
) -> None:
    """An id outside the SPEC pattern raises ValueError instead of producing a key."""
    with pytest.raises(ValueError, match="id pattern"):
        builder(bad)


def test_value_error_does_not_echo_the_id() -> None:
    """The error names which id is wrong, not its value."""
    with pytest.raises(ValueError, match="tenant_id") as caught:
        KEYS.user_scope("evil}*", "u")

    assert "evil" not in str(caught.value)


def test_token_spend_keys_have_a_hash_tag_per_tenant_and_period() -> None:
    """Budget counters: one key per tenant and period, each its own cluster slot, never
    matched by a tenant's or a user's SCAN pattern."""
    keys = RedisKeys(prefix="llmbot")
    day = keys.token_spend("shop_1", "20261125")
    assert day == "llmbot:{tokens:shop_1:20261125}:spent"
    month = keys.token_spend("shop_1", "202611")
    other = keys.token_spend("shop_2", "20261125")
    tags = {name[name.index("{") : name.index("}") + 1] for name in (day, month, other)}
    assert len(tags) == 3
    assert not fnmatchcase(day, keys.tenant_pattern("tokens"))
    with pytest.raises(ValueError, match="tenant_id"):
        keys.token_spend("shop}1", "20261125")
    with pytest.raises(ValueError, match="period_id"):
        keys.token_spend("shop_1", "2026-11")
