"""Which tools the model is offered for a message (SPEC 5.9), decided in this one place:
the event's own ``tools`` when it has any, else the configured ones: the persona's
(``personas.py``), which default to the tools file (``LLM_BOT_TOOLS_PATH``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from llm_bot.config import ConfigurationError
from llm_bot.contract.tools import MAX_TOOLS, ToolDefinition
from llm_bot.ports import ToolSpec

_TOOLS = TypeAdapter(list[ToolDefinition])


@dataclass(frozen=True)
class ToolCatalog:
    """The configured tools (Chat Completions definitions), offered when an event has none."""

    configured: tuple[ToolSpec, ...] = ()

    def for_message(self, event_tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        return event_tools or self.configured


def load_tool_catalog(path: Path | None) -> ToolCatalog:
    """The catalog of the tools file at ``path`` (none: an empty catalog); a file that is
    not a JSON list of at most 64 uniquely named OpenAI function definitions is a
    ``ConfigurationError`` naming the file and the field."""
    if path is None:
        return ToolCatalog()
    where = f"invalid configuration: LLM_BOT_TOOLS_PATH: {path}"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{where}: cannot read it ({exc.strerror})") from exc
    except ValueError as exc:
        raise ConfigurationError(f"{where}: not JSON ({exc})") from exc
    try:
        tools = _TOOLS.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(the top level)"
        raise ConfigurationError(f"{where}: {field}: {first['msg']}") from exc
    names = [tool.function.name for tool in tools]
    if len(tools) > MAX_TOOLS:
        raise ConfigurationError(f"{where}: {len(tools)} tools, at most {MAX_TOOLS}")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{where}: function names must be unique")
    return ToolCatalog(tuple(tool.for_chat() for tool in tools))
