"""A tool as callers see it: its human title, its complete input schema (the parameters model's
JSON schema plus the `idempotency_key` a writing tool takes, D2) and its result schema. MCP
tools/list, `/v1`'s OpenAPI document and the CLI's options are all read from here, so they name
the same parameters in the same words."""

from __future__ import annotations

from typing import Any

from fleetmem.memory.registry import ToolSpec
from fleetmem.protocol import IDEMPOTENCY_TTL_HOURS, REQUEST_ID, REQUEST_ID_MAX

IDEMPOTENCY_KEY = "idempotency_key"
IDEMPOTENCY_KEY_MAX = 200

IDEMPOTENCY_KEY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": IDEMPOTENCY_KEY_MAX,
    "description": "Optional. A unique string per logical write (e.g. a UUID). A retry with the same key "
    f"and the same arguments within {IDEMPOTENCY_TTL_HOURS} h returns the first result with "
    "idempotent_replay: true instead of writing again.",
}


#: D22: a write's request id (the newer name of `idempotency_key`).
REQUEST_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": REQUEST_ID_MAX,
    "pattern": "^[\\x21-\\x7e]+$",
    "description": "Optional. One id per logical write (a UUID is kept; any other id of printable ASCII is "
    "mapped to a UUID and echoed as client_request_id). A retry with the same id returns the first result "
    "with idempotent_replay: true; the answer's write_request is the write's durable receipt "
    "(get_write_request). When omitted the server makes one.",
}


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's complete input schema: its parameters and, on a tool that takes one (and does not
    define it as a parameter), `idempotency_key` and `request_id` (D22)."""
    schema = spec.input_schema()
    if spec.idempotency and IDEMPOTENCY_KEY not in schema["properties"]:
        schema = {**schema, "properties": {**schema["properties"], IDEMPOTENCY_KEY: IDEMPOTENCY_KEY_SCHEMA}}
    if spec.idempotency and REQUEST_ID not in schema["properties"]:
        schema = {**schema, "properties": {**schema["properties"], REQUEST_ID: REQUEST_ID_SCHEMA}}
    return schema


def result_schema(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema of the tool's success body (as serialized)."""
    return spec.result.model_json_schema(mode="serialization")


#: The display name of each tool (MCP `Tool.title`: what a client's tool picker or a connector
#: directory shows; `name` stays the identifier). A registered tool without one fails its test.
TOOL_TITLES: dict[str, str] = {
    "recall": "Recall memories",
    "remember": "Remember a fact",
    "entity": "Look up an entity",
    "synthesize": "Synthesize an answer",
    "forget": "Forget a fact",
    "context_pack": "Build a context pack",
    "delta": "What changed since",
    "get_page": "Read a page",
    "put_page": "Write a page",
    "delete_page": "Delete a page",
    "list_pages": "List pages",
    "list_facts": "List facts",
    "list_activity": "Who wrote what",
    "list_followers": "List delta followers",
    "trace_fact": "Trace a fact",
    "purge_fact": "Purge a fact",
    "export_pack": "Export a memory pack",
    "import_pack": "Import a memory pack",
    "memory_stats": "Memory statistics",
    "whoami": "Who am I",
    "create_token": "Create an access token",
    "list_tokens": "List access tokens",
    "revoke_token": "Revoke an access token",
    "get_write_request": "Read a write receipt",
    "list_write_requests": "List write receipts",
    "cancel_write_request": "Cancel a write request",
}


def tool_title(spec: ToolSpec) -> str:
    """The tool's human title (its name, spaced, for a tool the table does not know yet)."""
    return TOOL_TITLES.get(spec.name) or spec.name.replace("_", " ").capitalize()


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema a successful call's `structuredContent` conforms to (MCP `outputSchema`):
    the result model's, which is an object schema. An error result carries no structured content."""
    schema = result_schema(spec)
    schema.setdefault("type", "object")
    return schema
