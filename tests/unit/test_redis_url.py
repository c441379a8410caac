"""REDIS_URL's forms: one node (or any node of a cluster), a node list, Sentinel."""

from __future__ import annotations

import pytest

from llm_bot.adapters.redis_keys import SCHEDULE_SHARDS, RedisKeys
from llm_bot.config import ConfigurationError, load_settings
from llm_bot.redis_url import parse_redis_url


def test_one_node() -> None:
    target = parse_redis_url("redis://cache:6379/0")
    assert (target.kind, target.urls) == ("nodes", ("redis://cache:6379/0",))


def test_a_node_list_is_the_nodes_of_one_cluster() -> None:
    target = parse_redis_url("redis://a:7000, redis://b:7001,rediss://c:7002")
    assert target.urls == ("redis://a:7000", "redis://b:7001", "rediss://c:7002")


def test_sentinel_with_password_service_and_db() -> None:
    target = parse_redis_url("redis+sentinel://:s%40cret@s1:26379,s2:26380/mymaster/2")
    assert target.kind == "sentinel"
    assert target.sentinels == (("s1", 26379), ("s2", 26380))
    assert (target.service, target.db, target.username, target.password) == (
        "mymaster",
        2,
        None,
        "s@cret",
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://cache:6379", "redis://"),
        ("redis://a:7000,unix:///tmp/r.sock", "not unix://"),
        ("redis://a:notaport", "not a URL"),
        ("redis+sentinel://s1:26379", "Sentinel URL"),
        ("redis+sentinel://s1/mymaster", "is not host:port"),
        ("redis+sentinel://s1:26379/mymaster/x", "Sentinel URL"),
    ],
)
def test_a_bad_url_is_refused_naming_the_form_expected(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_redis_url(url)


def test_settings_name_the_variable_of_a_bad_url() -> None:
    with pytest.raises(ConfigurationError, match="REDIS_URL"):
        load_settings(redis_url="redis+sentinel://nowhere")


def test_a_users_schedule_entries_share_one_shard_and_users_spread_over_all() -> None:
    activity = RedisKeys(prefix="p").activity()
    assert len(activity.shards) == SCHEDULE_SHARDS
    assert activity.of("t|u|c1") == activity.of("t|u|c2") == activity.of("t|u")
    shards = {activity.of(f"t|user{n}|c") for n in range(200)}
    assert shards == set(activity.shards)
    assert activity.every == (*activity.shards, "p:activity")
    assert all(name.startswith("p:{sched:") for name in activity.shards)
