"""make test's worker groups: the tests of one session cluster run in one worker."""

from __future__ import annotations

from pathlib import Path

from tests.support.workers import CLUSTER_MODULES, group_of, misplaced

KILL = (
    "tests/e2e/test_rabbit_cluster.py::test_kill_9_of_the_connected_node_mid_stream_loses_nothing"
)
FAILOVER = (
    "tests/integration/test_redis_cluster.py::test_a_primary_failover_mid_stream_loses_nothing"
)
ERASURE = "tests/integration/test_erasure_everywhere.py::test_no_key_survives[on a cluster]"


def test_a_cluster_modules_tests_are_in_that_clusters_group() -> None:
    assert group_of(KILL) == "rabbit_cluster"
    assert group_of(FAILOVER) == group_of(ERASURE) == "redis_cluster"


def test_any_other_test_is_a_group_of_its_own() -> None:
    assert group_of("tests/unit/test_config.py::test_defaults") is None
    assert group_of("tests/e2e/test_faults.py::test_rabbit_cluster") is None


def test_a_test_of_a_cluster_outside_its_modules_is_reported() -> None:
    fixtures = ["service_urls", "redis_cluster", "rabbit_cluster"]
    assert misplaced("tests/e2e/test_new.py::test_x", fixtures) == [
        "redis_cluster",
        "rabbit_cluster",
    ]
    assert misplaced(FAILOVER, fixtures) == ["rabbit_cluster"]
    assert misplaced(KILL, ["rabbit_cluster", "tmp_path"]) == []


def test_every_listed_module_exists() -> None:
    root = Path(__file__).resolve().parents[2]
    for modules in CLUSTER_MODULES.values():
        for module in modules:
            assert (root / module).is_file(), module
