"""Which tools the model is offered for a message (SPEC 5.9), decided in this one place:
the event's own ``tools`` when it has any, else the configured ones: the persona's
(``personas.py``), which default to the tools file (``LLM_BOT_TOOLS_PATH``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

from llm_bot.config import ConfigurationError
from llm_bot.contract.tools import MAX_TOOLS, ToolDefinition
from llm_bot.ports import ToolSpec
from llm_bot.service.config_files import config_file_error, load_config_file

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
    where = config_file_error("LLM_BOT_TOOLS_PATH", path)
    tools = load_config_file(path, "LLM_BOT_TOOLS_PATH", _TOOLS, yaml_ok=False)
    names = [tool.function.name for tool in tools]
    if len(tools) > MAX_TOOLS:
        raise ConfigurationError(f"{where}: {len(tools)} tools, at most {MAX_TOOLS}")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{where}: function names must be unique")
    return ToolCatalog(tuple(tool.for_chat() for tool in tools))
