"""Dispatch is on types, not strings (issue 46): where the reply graph went is a
``Route`` member matched exhaustively, never a string compared or written; a memory job is
decoded once into its command (``service/memory_commands.py``) and dispatched on its class,
never on its ``kind``."""

from __future__ import annotations

import re
from pathlib import Path

from llm_bot.service.chat_runs import Route

SERVICES = Path(__file__).resolve().parents[2] / "services" / "llm_bot"
ROUTE_STRINGS = "|".join(re.escape(route.value) for route in Route)
STRING_ROUTE = re.compile(
    rf"""(route\W{{0,3}}\s*(==|!=|in)\s*\(?\s*["'](?:{ROUTE_STRINGS})["'])"""
    rf"""|(["']route["']\s*:\s*["'](?:{ROUTE_STRINGS})["'])"""
    rf"""|(ToolStep\(\s*["'](?:{ROUTE_STRINGS})["'])"""
)


JOB_KIND_TEST = re.compile(r"""\.kind\s*(==|!=)\s*["'](?:turn|finalize)["']""")


def string_routes(text: str) -> list[str]:
    return [match.group(0) for match in STRING_ROUTE.finditer(text)]


def job_kind_tests(text: str) -> list[str]:
    return [match.group(0) for match in JOB_KIND_TEST.finditer(text)]


def test_no_route_is_a_string_in_the_service() -> None:
    found = {
        path.relative_to(SERVICES).as_posix(): hits
        for path in sorted(SERVICES.rglob("*.py"))
        if (hits := string_routes(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_check_sees_a_route_written_as_a_string() -> None:
    assert string_routes('if run.route == "skip":') == ['route == "skip"']
    assert string_routes('Command(update={"route": "tool"}, goto="recall")') == ['"route": "tool"']
    assert string_routes('if state["route"] != "flow":') == ['route"] != "flow"']
    assert string_routes("if run.route == Route.SKIP:") == []


def test_no_memory_job_is_dispatched_on_its_kind() -> None:
    found = {
        path.relative_to(SERVICES).as_posix(): hits
        for path in sorted(SERVICES.rglob("*.py"))
        if (hits := job_kind_tests(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_check_sees_a_job_kind_compared() -> None:
    assert job_kind_tests('finalize=job.kind == "finalize"') == ['.kind == "finalize"']
    assert job_kind_tests("case FormTurn(turn=turn):") == []
