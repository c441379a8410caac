"""The package layers of ``services/llm_bot`` (docs/architecture.md "Layers"): no import
circle between packages, and no package imports one it is not allowed to.

Every import counts, as in ``/work/shared/tools/package_cycles.py``: top-level,
function-local and ``TYPE_CHECKING`` ones. A unit is a subpackage or a top-level module.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "llm_bot"

_LEAVES = frozenset(
    {
        "amqp_url",
        "redis_url",
        "token_budgets",
        "context_budget",
        "header_text",
        "access_lists",
        "redaction",
    }
)
"""Top-level modules of parse rules and value types, below config."""
_CORE = frozenset({"contract", "errors", "config"}) | _LEAVES
_STORES = _CORE | {"memory", "ports", "telemetry"}

ALLOWED: Mapping[str, frozenset[str]] = {
    "contract": frozenset(),
    "amqp_url": frozenset(),
    "redis_url": frozenset(),
    "token_budgets": frozenset(),
    "context_budget": frozenset(),
    "header_text": frozenset(),
    "redaction": frozenset(),
    "access_lists": frozenset({"contract"}),
    "errors": frozenset({"contract", "redaction"}),
    "config": _LEAVES | {"contract"},
    "telemetry": _CORE,
    "memory": _CORE,
    "ports": _CORE | {"memory"},
    "flows": _CORE | {"memory", "ports"},
    "service": _STORES | {"flows"},
    "graph": _STORES | {"flows", "service"},
    "client": frozenset({"contract", "amqp_url"}),  # its own distribution: clients/python
    "adapters": _STORES | {"client"},
    "auth_throttle": _CORE | {"telemetry"},
    "gateway": _CORE | {"adapters", "telemetry", "auth_throttle", "client"},
    "delivery": _STORES | {"flows", "service", "adapters"},
    "fake_model": _CORE | {"memory"},
    "logs": _CORE | {"telemetry"},
    "bootstrap": _STORES | {"flows", "service", "graph", "adapters", "gateway", "delivery"},
    "entrypoints": _STORES
    | {"flows", "service", "graph", "adapters", "gateway", "delivery", "bootstrap", "fake_model"}
    | {"auth_throttle", "client"},
    "inspector": _STORES
    | {"flows", "service", "graph", "adapters", "gateway", "delivery", "bootstrap"}
    | {"auth_throttle"}
    | {"entrypoints"},
    "cli": frozenset(),  # the top: may import anything (checked below)
    "__main__": frozenset({"cli"}),
}
"""Which units each unit may import (imports within a unit are free)."""

KNOWN_VIOLATIONS: Mapping[tuple[str, str], str] = {}
"""Edges not allowed yet, each with what removes it. The list only shrinks: an entry whose
edge is gone fails the test until it is deleted here."""


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        return [node.module] if node.module else []
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return [".".join([*base, *([node.module] if node.module else [])])]


def package_edges(root: Path = PACKAGE) -> dict[tuple[str, str], set[str]]:
    """(importing unit, imported unit) → the files that import across that edge."""
    edges: dict[tuple[str, str], set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        source = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node, module, path.name == "__init__.py"):
                if name != "llm_bot" and not name.startswith("llm_bot."):
                    continue
                target = _unit(name)
                if target not in (source, "__init__"):
                    edges.setdefault((source, target), set()).add(str(path.relative_to(root)))
    return edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(vertex: str) -> None:
        index[vertex] = low[vertex] = len(index)
        stack.append(vertex)
        on_stack.add(vertex)
        for nxt in graph[vertex]:
            if nxt not in index:
                visit(nxt)
                low[vertex] = min(low[vertex], low[nxt])
            elif nxt in on_stack:
                low[vertex] = min(low[vertex], index[nxt])
        if low[vertex] == index[vertex]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == vertex:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for vertex in graph:
        if vertex not in index:
            visit(vertex)
    return found


def test_the_cycle_finder_finds_a_circle() -> None:
    """The checker itself: a three-unit circle is found, a chain is not."""
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert cycles({("a", "b"), ("b", "c")}) == []


def test_no_import_circle_between_packages() -> None:
    """No package or top-level module reaches itself through another one's imports."""
    assert cycles(set(package_edges())) == []


def test_every_unit_has_a_place_in_the_layers() -> None:
    """A new package or top-level module is placed in ``ALLOWED`` (and the docs) first."""
    units = {unit for edge in package_edges() for unit in edge} - {"__init__"}
    assert units - set(ALLOWED) == set()


def test_no_import_of_a_higher_layer() -> None:
    """Every import across packages is allowed by the layer rules, or a known violation."""
    edges = package_edges()
    upward = {
        f"{source} -> {target} ({', '.join(sorted(files))})"
        for (source, target), files in edges.items()
        if source != "cli"
        and target not in ALLOWED.get(source, frozenset())
        and (source, target) not in KNOWN_VIOLATIONS
    }
    assert sorted(upward) == []
    assert not any(target == "cli" for _, target in edges if _ != "__main__")


def test_known_violations_only_shrink() -> None:
    """An allowed-for-now edge that no longer exists is struck from ``KNOWN_VIOLATIONS``."""
    edges = package_edges()
    gone = [edge for edge in KNOWN_VIOLATIONS if edge not in edges]
    assert gone == []
    assert all(edge[1] not in ALLOWED[edge[0]] for edge in KNOWN_VIOLATIONS)


def module_edges(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """(importing module, imported module) over every file of the package: a name imported
    from a module counts as that module (``from a.b import C``: ``a.b``, or ``a.b.C`` when
    that is a module itself, and then not ``a.b``)."""
    modules: dict[Path, str] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).with_suffix("")
        modules[path] = ".".join(relative.parts).removesuffix(".__init__")
    known = set(modules.values())
    edges: set[tuple[str, str]] = set()
    for path, module in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = _imported(node, module, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom) and names:
                base = names[0]
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                names = [n if n in known else base for n in submodules]
            for name in names:
                if name in known and name != module:
                    edges.add((module, name))
    return edges


def test_no_import_circle_between_modules() -> None:
    """No module reaches itself through other modules' imports, within a package too
    (``package_cycles.py --modules``)."""
    assert cycles(module_edges()) == []
