"""Files named by configuration (``LLM_BOT_TOOLS_PATH``, ``LLM_BOT_PERSONAS_PATH``): read,
parsed and validated at start, every failure one ``ConfigurationError`` line naming the
variable, the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

from llm_bot.config import ConfigurationError

T = TypeVar("T")


def load_config_file(path: Path, variable: str, schema: TypeAdapter[T], *, yaml_ok: bool) -> T:
    """The file's content validated by ``schema``; JSON, or YAML when ``yaml_ok`` and the
    name does not end in ``.json``."""
    where = config_file_error(variable, path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{where}: cannot read it ({exc.strerror})") from exc
    as_yaml = yaml_ok and path.suffix != ".json"
    try:
        raw: Any = yaml.safe_load(text) if as_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"{where}: not {'YAML' if as_yaml else 'JSON'} ({exc})") from exc
    try:
        return schema.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(the top level)"
        raise ConfigurationError(f"{where}: {field}: {first['msg']}") from exc


def config_file_error(variable: str, path: Path) -> str:
    """The start of every error line about the file."""
    return f"invalid configuration: {variable}: {path}"
