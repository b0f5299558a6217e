"""A tool as callers see it: its complete input schema (the parameters model's JSON schema plus the
`idempotency_key` a writing tool takes, D2) and its result schema. MCP tools/list, `/v1`'s OpenAPI
document and the CLI's options are all read from here, so they name the same parameters in the
same words."""

from __future__ import annotations

from typing import Any

from fleetmem.memory.registry import ToolSpec
from fleetmem.protocol import IDEMPOTENCY_TTL_HOURS

IDEMPOTENCY_KEY = "idempotency_key"
IDEMPOTENCY_KEY_MAX = 200

IDEMPOTENCY_KEY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": IDEMPOTENCY_KEY_MAX,
    "description": "Optional. A unique string per logical write (e.g. a UUID). A retry with the same key "
    f"and the same arguments within {IDEMPOTENCY_TTL_HOURS} h returns the first result with "
    "idempotent_replay: true instead of writing again.",
}


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's complete input schema: its parameters and, on a tool that takes one (and does not
    define it as a parameter), `idempotency_key`."""
    schema = spec.input_schema()
    if spec.idempotency and IDEMPOTENCY_KEY not in schema["properties"]:
        schema = {**schema, "properties": {**schema["properties"], IDEMPOTENCY_KEY: IDEMPOTENCY_KEY_SCHEMA}}
    return schema


def result_schema(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema of the tool's success body (as serialized)."""
    return spec.result.model_json_schema(mode="serialization")
