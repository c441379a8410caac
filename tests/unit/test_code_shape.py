"""The shape of ``services/``: no module over ``MAX_FILE_LINES`` lines and no function over
``MAX_FUNCTION_LINES`` (docstring included), so each room can be read at once (issue 46).

What is still over is listed with what will bring it under; the lists only shrink: an entry
that is no longer over fails the test until it is deleted here."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "services"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

KNOWN_LONG_FILES: Mapping[str, str] = {}
KNOWN_LONG_FUNCTIONS: Mapping[str, str] = {}


def _modules() -> Iterator[tuple[str, str]]:
    for path in sorted(SERVICES.rglob("*.py")):
        yield path.relative_to(SERVICES).as_posix(), path.read_text(encoding="utf-8")


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            yield f"{prefix}{node.name}", node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{prefix}{node.name}.")


def test_no_module_is_longer_than_the_limit() -> None:
    long = {name for name, text in _modules() if len(text.splitlines()) > MAX_FILE_LINES}
    assert long - KNOWN_LONG_FILES.keys() == set(), f"over {MAX_FILE_LINES} lines"
    assert KNOWN_LONG_FILES.keys() - long == set(), "no longer over: delete from KNOWN_LONG_FILES"


def test_no_function_is_longer_than_the_limit() -> None:
    long = {
        f"{name}:{function}"
        for name, text in _modules()
        for function, lines in _functions(ast.parse(text))
        if lines > MAX_FUNCTION_LINES
    }
    assert long - KNOWN_LONG_FUNCTIONS.keys() == set(), f"over {MAX_FUNCTION_LINES} lines"
    assert KNOWN_LONG_FUNCTIONS.keys() - long == set(), (
        "no longer over: delete from KNOWN_LONG_FUNCTIONS"
    )


def test_the_shape_check_sees_a_long_function() -> None:
    body = "\n".join(f"    x{n} = {n}" for n in range(MAX_FUNCTION_LINES))
    lengths = dict(_functions(ast.parse(f"class C:\n  def f(self):\n{body}\n")))
    assert lengths["C.f"] == MAX_FUNCTION_LINES + 1
