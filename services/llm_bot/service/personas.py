"""Personas (SPEC 5.10): named configurations of the reply (system prompt, tools, model,
retrieval on/off) from ``LLM_BOT_PERSONAS_PATH``, chosen per event by
``metadata.persona``.

The file is YAML or JSON (by its suffix: ``.json`` is JSON, anything else YAML)::

    default: companion            # optional: the persona of events that name none
    personas:
      companion:
        system_prompt: You are a warm companion who remembers what people tell you.
        retrieval: true           # default true
      orders:
        system_prompt: You answer questions about orders, briefly.
        model: gpt-4o-mini        # default: OPENAI_MODEL
        tools: [...]              # OpenAI function definitions; default: LLM_BOT_TOOLS_PATH's
      checkin:
        flow: checkin             # a flow persona: a message naming it starts the flow
    flows:                        # structured dialogues (see flows/definitions.py)
      checkin:
        questions: [...]

Without a file, or for a persona left unset, the service behaves as configured by
``LLM_BOT_SYSTEM_PROMPT``, ``LLM_BOT_TOOLS_PATH`` and ``OPENAI_MODEL``: the persona named
``default``. A conversation keeps the persona its last message chose, so tool results and
messages that name none continue with it.

A persona with a ``flow`` runs that flow (SPEC 5.10): a message naming it starts the flow
when none is running in the conversation; the conversation's next messages answer it,
whatever persona they name, until it completes, is exited or expires; then the
conversation carries on with the persona it had. The default persona cannot be a flow
persona (every message would start a questionnaire).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from llm_bot.config import ConfigurationError
from llm_bot.contract.tools import MAX_TOOLS, ToolDefinition
from llm_bot.errors import InvalidEvent
from llm_bot.flows.definitions import Flow
from llm_bot.service.config_files import config_file_error, load_config_file
from llm_bot.service.tool_catalog import ToolCatalog

DEFAULT_PERSONA = "default"
PersonaName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


class _PersonaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    system_prompt: str | None = None
    model: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    retrieval: bool = True
    tools: list[ToolDefinition] | None = Field(None, max_length=MAX_TOOLS)
    flow: PersonaName | None = None


class _PersonasFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: PersonaName | None = None
    personas: dict[PersonaName, _PersonaSpec] = Field(min_length=1)
    flows: dict[PersonaName, Flow] = Field(default_factory=dict)


_FILE = TypeAdapter(_PersonasFile)


@dataclass(frozen=True)
class Persona:
    """How one persona replies."""

    name: str
    system_prompt: str
    model: str | None = None
    """None: the service's ``OPENAI_MODEL``."""
    retrieval: bool = True
    tools: ToolCatalog = field(default_factory=ToolCatalog)
    flow: str | None = None
    """The flow this persona runs (a key of ``PersonaCatalog.flows``), or None (chat)."""


@dataclass(frozen=True)
class PersonaCatalog:
    """The personas by name, the one for events that name none, and the flows."""

    default: Persona
    named: Mapping[str, Persona] = field(default_factory=dict)
    flows: Mapping[str, Flow] = field(default_factory=dict)

    def choose(self, requested: str | None, remembered: str | None = None) -> Persona:
        """The persona an event asked for (``metadata.persona``), else the one its
        conversation last used, else the default. An unknown requested name is the
        event's error (``InvalidEvent``); a remembered one that left the file falls back
        to the default."""
        if requested is not None:
            persona = self._get(requested)
            if persona is None:  # the error never lists the personas that exist
                raise InvalidEvent(f"metadata.persona: unknown persona {requested!r}")
            return persona
        if remembered is not None:
            return self._get(remembered) or self.default
        return self.default

    def _get(self, name: str) -> Persona | None:
        if name in (self.default.name, DEFAULT_PERSONA):
            return self.default
        return self.named.get(name)


def single_persona(system_prompt: str, tools: ToolCatalog) -> PersonaCatalog:
    """The catalog without a personas file: today's behaviour, named ``default``."""
    return PersonaCatalog(default=Persona(DEFAULT_PERSONA, system_prompt, tools=tools))


def load_personas(path: Path | None, *, system_prompt: str, tools: ToolCatalog) -> PersonaCatalog:
    """The personas of the file at ``path`` (none: the single default persona); a file that
    cannot be read or does not validate is a ``ConfigurationError`` naming the file and the
    field."""
    if path is None:
        return single_persona(system_prompt, tools)
    where = config_file_error("LLM_BOT_PERSONAS_PATH", path)
    parsed = load_config_file(path, "LLM_BOT_PERSONAS_PATH", _FILE, yaml_ok=True)
    personas: dict[str, Persona] = {}
    for name, spec in parsed.personas.items():
        names = [tool.function.name for tool in spec.tools or ()]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"{where}: personas.{name}.tools: names must be unique")
        personas[name] = Persona(
            name=name,
            system_prompt=system_prompt if spec.system_prompt is None else spec.system_prompt,
            model=spec.model,
            retrieval=spec.retrieval,
            tools=tools
            if spec.tools is None
            else ToolCatalog(tuple(tool.for_chat() for tool in spec.tools)),
            flow=spec.flow,
        )
        if spec.flow is not None and spec.flow not in parsed.flows:
            raise ConfigurationError(
                f"{where}: personas.{name}.flow: {spec.flow!r} is not one of the flows"
            )
    if parsed.default is not None and parsed.default not in personas:
        raise ConfigurationError(f"{where}: default: {parsed.default!r} is not one of the personas")
    if parsed.default is not None:
        default = personas.pop(parsed.default)
    elif DEFAULT_PERSONA in personas:
        default = personas.pop(DEFAULT_PERSONA)
    else:
        default = single_persona(system_prompt, tools).default
    if default.flow is not None:
        raise ConfigurationError(
            f"{where}: personas.{default.name}.flow: the default persona cannot run a flow "
            "(every message naming no persona would start it)"
        )
    return PersonaCatalog(default=default, named=personas, flows=parsed.flows)
