"""``load_settings``: the one place that reads the environment, and its one-line error."""

from __future__ import annotations

from pydantic import AliasChoices, ValidationError

from llm_bot.config.settings import Settings


class ConfigurationError(Exception):
    """Invalid configuration; ``str()`` is one line naming the variable."""


def _variable_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    info = Settings.model_fields.get(field)
    if info is not None and isinstance(info.validation_alias, AliasChoices):
        return str(info.validation_alias.choices[0])
    return field.upper()


def load_settings(**overrides: object) -> Settings:
    """Read and validate the settings; raise :class:`ConfigurationError` on a bad value."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]  # overrides are validated here
    except ValidationError as exc:
        first = exc.errors()[0]
        name = _variable_name(tuple(first["loc"]))
        raw = first.get("input")
        hidden = isinstance(raw, dict) or any(word in name for word in ("URL", "KEY", "SECRET"))
        shown = "" if hidden else f" (got {raw!r})"
        raise ConfigurationError(
            f"invalid configuration: {name}: {first['msg'].removeprefix('Value error, ')}{shown}"
        ) from exc
