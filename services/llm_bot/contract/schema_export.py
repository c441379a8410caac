"""JSON Schemas of the wire messages, generated from the pydantic models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from llm_bot.contract.messages import (
    CandidateDeltaV1,
    CandidateV1,
    ErrorV1,
    FlowResultV1,
    InternalEventV2,
    MemoryJobV1,
)

SCHEMA_FILES: dict[str, type[BaseModel]] = {
    "internal.event.v2.schema.json": InternalEventV2,
    "candidate.v1.schema.json": CandidateV1,
    "candidate.delta.v1.schema.json": CandidateDeltaV1,
    "llmbot.error.v1.schema.json": ErrorV1,
    "llmbot.memory_job.v1.schema.json": MemoryJobV1,
    "flow.result.v1.schema.json": FlowResultV1,
}


def json_schema(model: type[BaseModel], file_name: str) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://llm-bot.invalid/schemas/{file_name}",
        **schema,
    }


def render(model: type[BaseModel], file_name: str) -> str:
    return json.dumps(json_schema(model, file_name), indent=2, ensure_ascii=False) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema file; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, model in SCHEMA_FILES.items():
        path = directory / file_name
        path.write_text(render(model, file_name), encoding="utf-8")
        written.append(path)
    return written


def stale_schemas(directory: Path) -> list[str]:
    """File names whose content differs from what the models generate."""
    return [
        name
        for name, model in SCHEMA_FILES.items()
        if not (directory / name).exists()
        or (directory / name).read_text(encoding="utf-8") != render(model, name)
    ]
