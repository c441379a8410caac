"""Dispatch is on types, not strings (issue 46): where the reply graph went is a
``Route`` member matched exhaustively, never a string compared or written."""

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


def string_routes(text: str) -> list[str]:
    return [match.group(0) for match in STRING_ROUTE.finditer(text)]


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
