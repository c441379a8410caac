"""How ``make test`` spreads the suite over pytest-xdist workers (``-n 4 --dist loadgroup``).

Each test runs in whichever worker is free, but the tests of a session-scoped cluster
fixture (``redis_cluster``, ``rabbit_cluster``: a cluster of the session's own, built once
per session, which is once per worker) are one group, run by one worker: the cluster is
built once, as in a run without workers.

The groups are named here by module, not read from ``xdist_group`` marks: pytest-xdist
3.8 carries a mark's group to the scheduler by rewriting the test's node id, which pytest
9.2 no longer lets it do (pytest-dev/pytest-xdist#1386), so the marks are ignored.
``check_groups`` fails the collection when a test requests a cluster fixture from a module
not listed for it, so a new cluster test cannot quietly build a second cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from xdist.scheduler import LoadGroupScheduling

CLUSTER_MODULES: Mapping[str, tuple[str, ...]] = {
    "redis_cluster": (
        "tests/integration/test_redis_cluster.py",
        "tests/integration/test_erasure_everywhere.py",
    ),
    "rabbit_cluster": ("tests/e2e/test_rabbit_cluster.py",),
}
"""Session-scoped cluster fixture (``tests/conftest.py``) -> the modules whose tests use it."""


def group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (its module's cluster), or None: a group of its own."""
    module = nodeid.partition("::")[0]
    return next((name for name, modules in CLUSTER_MODULES.items() if module in modules), None)


def misplaced(nodeid: str, fixturenames: Iterable[str]) -> list[str]:
    """The cluster fixtures the test ``nodeid`` requests that its module is not listed for."""
    return [name for name in fixturenames if name in CLUSTER_MODULES and group_of(nodeid) != name]


class ClusterGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped
    """``--dist loadgroup`` with the groups above (any ``xdist_group`` mark's too, once
    pytest-xdist carries them again)."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or str(super()._split_scope(nodeid))
