"""Tools on the wire (SPEC 5.9): the function definitions an event offers the model, and
the calls a ``tool_call`` candidate asks the integrator to run."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_TOOLS = 64
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""OpenAI's rule for function names."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class FunctionDefinition(_Wire):
    name: ToolName
    description: Annotated[str, StringConstraints(max_length=4096)] | None = None
    parameters: dict[str, Any] | None = Field(
        None, description="JSON Schema of the arguments (an object schema)."
    )
    strict: bool | None = None


class ToolDefinition(_Wire):
    """An OpenAI function tool definition, as Chat Completions takes it."""

    type: Literal["function"] = "function"
    function: FunctionDefinition

    def for_chat(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def for_responses(self) -> dict[str, Any]:
        """The Responses API's flat shape (``{"type": "function", "name", ...}``)."""
        return {"type": "function", **self.function.model_dump(mode="json", exclude_none=True)}


class CandidateToolCall(_Wire):
    """One call the model asked for: run it, publish its ``tool.result``."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=128)] = Field(
        description="The call's id: the tool.result's tool.tool_call_id."
    )
    name: str = Field(description="The function's name.")
    arguments: str = Field(description="The arguments as the model gave them (a JSON string).")
