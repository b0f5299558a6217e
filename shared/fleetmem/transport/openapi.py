"""The OpenAPI 3.1 document of `/v1` (`GET /v1/openapi.json`), generated from the registry
(`openapi_document`): one operation per tool, its request body the tool's inputSchema (what MCP
tools/list shows), its 200 the tool's result model, every error the shared `ErrorEnvelope` component,
drawn from the envelope model itself (`fleetmem.contract.envelope.ErrorEnvelope`). It is never
written by hand.

Light at import: the registry and the tools' schemas are imported only when a document is made.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fleetmem.contract.envelope import ErrorEnvelope
from fleetmem.contract.routes import OPENAPI_PATH, TOOLS_PATH, v1_tool_path
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION, SERVER_NAME, Surface

if TYPE_CHECKING:
    from fleetmem.memory.registry import ToolSpec

_REF = re.compile(r"^#/\$defs/(.+)$")
_EXAMPLE = re.compile(r"Example:\s*(?=\{)")

NOTICES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object"},
    "description": "Notices (AGENT_OPERATOR): the same objects MCP puts in _meta['fleetmem/notices']. "
    "Present only when the call produced any.",
}
DRY_RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "`dry_run: true` on a tool without its own dry_run parameter: the arguments passed "
    "the schema and nothing ran.",
    "properties": {
        "dry_run": {"const": True},
        "tool": {"type": "string"},
        "ran": {"const": False},
        "arguments": {"type": "object"},
        "protocol_version": {"type": "string"},
        "notices": NOTICES_SCHEMA,
    },
    "required": ["dry_run", "tool", "ran", "arguments", "protocol_version"],
    "additionalProperties": False,
}

#: The error responses every operation documents (status -> when), besides its code table.
ERROR_RESPONSES: dict[str, str] = {
    "400": "invalid_params / provenance_required: the arguments do not fit the tool (the fix is the "
    "corrected call), or the body is not a JSON object or not declared as `application/json`.",
    "401": "unauthorized: no, unknown or revoked bearer credential.",
    "403": "scope_denied: the credential's scopes do not allow this tool.",
    "404": "not_found / unknown_tool: the named thing does not exist, or the tool is not on this surface.",
    "413": "invalid_params: the request body is larger than the server accepts.",
    "421": "invalid_params: the Host header does not name this server (a local server answers only "
    "requests for its own address: DNS-rebinding protection).",
    "429": "rate_limited: this client's rate limit or quota is used up; see Retry-After.",
    "500": "internal: an unexpected server error; quote correlation_id to the operator.",
    "503": "unavailable: a backend is temporarily unavailable; see Retry-After.",
}


def _hoist(schema: dict[str, Any], name: str, components: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` moved into `components` (named `<name>.<Def>`) and every
    `#/$defs/X` reference (a `$ref` or a discriminator's mapping) rewritten to
    `#/components/schemas/<name>.<X>`; returns a copy."""
    schema = copy.deepcopy(schema)
    defs = schema.pop("$defs", {})

    def ref(value: str) -> str:
        m = _REF.match(value)
        return f"#/components/schemas/{name}.{m.group(1)}" if m else value

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    out[k] = ref(v)
                elif k == "discriminator" and isinstance(v, dict) and isinstance(v.get("mapping"), dict):
                    # A tagged union's mapping names its members by reference too.
                    out[k] = {**v, "mapping": {tag: ref(target) for tag, target in v["mapping"].items()}}
                else:
                    out[k] = rewrite(v)
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for def_name, def_schema in defs.items():
        components[f"{name}.{def_name}"] = rewrite(def_schema)
    hoisted: dict[str, Any] = rewrite(schema)
    return hoisted


def description_examples(description: str) -> list[dict[str, Any]]:
    """The JSON objects a tool description shows after `Example:` (the calls it teaches)."""
    out: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    for m in _EXAMPLE.finditer(description):
        try:
            value, _ = decoder.raw_decode(description, m.end())
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _operation(spec: ToolSpec, components: dict[str, Any]) -> dict[str, Any]:
    from fleetmem.contract.tools import result_schema, tool_schema

    request = _hoist(tool_schema(spec), f"{spec.name}.request", components)
    if spec.writes:
        # D3: a write refuses parameters it does not know (a read ignores them with a notice).
        request["additionalProperties"] = False
    result = _hoist(result_schema(spec), f"{spec.name}.result", components)
    result.setdefault("properties", {})["notices"] = NOTICES_SCHEMA
    components[f"{spec.name}.result"] = result
    media: dict[str, Any] = {"schema": request}
    examples = [e for e in description_examples(spec.description) if set(e) <= set(request["properties"])]
    if examples:
        media["examples"] = {f"example{i + 1}": {"value": e} for i, e in enumerate(examples)}
    responses: dict[str, Any] = {
        "200": {
            "description": f"The {spec.name} result ({spec.result.__name__}).",
            "headers": {CORRELATION_HEADER: {"$ref": "#/components/headers/CorrelationId"}},
            "content": {
                "application/json": {
                    "schema": {
                        "anyOf": [
                            {"$ref": f"#/components/schemas/{spec.name}.result"},
                            {"$ref": "#/components/schemas/DryRunResult"},
                        ]
                    }
                }
            },
        }
    }
    for status in ERROR_RESPONSES:
        responses[status] = {"$ref": f"#/components/responses/Error{status}"}
    return {
        "operationId": spec.name,
        "summary": spec.description.split(". ", 1)[0][:200],
        "description": spec.description,
        "tags": ["verbs" if spec.surface == "verbs" else "full"],
        "security": [{"bearer": [spec.scope]}],
        "x-fleetmem-scope": spec.scope,
        "x-fleetmem-writes": spec.writes,
        "requestBody": {"required": True, "content": {"application/json": media}},
        "responses": responses,
    }


#: Stateful links (OpenAPI `links`): a later call that takes what an earlier one returned.
LINKS: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "remember": {"ForgetRemembered": ("forget", {"id": "$response.body#/id"})},
    "put_page": {"GetPutPage": ("get_page", {"slug": "$response.body#/slug"})},
}


def openapi_document(
    surface: Surface, *, server_url: str = "/", tools: Iterable[ToolSpec] | None = None
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `/v1` on this surface, generated from the registry."""
    import fleetmem

    schemas: dict[str, Any] = {}
    paths = _tool_paths(_specs(surface, tools), schemas)
    schemas.update(_shared_schemas(schemas))
    auth_errors = {s: {"$ref": f"#/components/responses/Error{s}"} for s in ("401", "429", "500", "503")}
    paths[TOOLS_PATH] = _get_operation(
        "list_tools",
        "The tools this credential may call on this surface (MCP tools/list).",
        "The tool list.",
        {"$ref": "#/components/schemas/ToolList"},
        auth_errors,
    )
    paths[OPENAPI_PATH] = _get_operation(
        "openapi", "This document.", "The OpenAPI 3.1 document of /v1.", {"type": "object"}, auth_errors
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"{SERVER_NAME} HTTP API",
            "version": fleetmem.__version__,
            "description": "MEMORY_VERBS v1 tools over plain HTTP: POST /v1/<tool> with the tool's arguments "
            "as a JSON object. The same tools, scopes, tenancy and error envelope as the MCP endpoint; "
            f"protocol {PROTOCOL_VERSION}, contract {CONTRACT_VERSION}. Generated from the tool registry.",
        },
        "servers": [{"url": server_url}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": _components(schemas),
    }


def _specs(surface: Surface, tools: Iterable[ToolSpec] | None) -> list[ToolSpec]:
    """The tools of this surface (every registered tool unless `tools` names them)."""
    from fleetmem.memory.registry import on_surface
    from fleetmem.memory.verbs import REGISTRY

    every = tools if tools is not None else REGISTRY.values()
    return [s for s in every if on_surface(s, surface)]


def _tool_paths(specs: list[ToolSpec], schemas: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/<tool>` per tool, with the stateful links among the tools present."""
    paths: dict[str, Any] = {}
    names = {s.name for s in specs}
    for spec in specs:
        op = _operation(spec, schemas)
        links = {
            link: {"operationId": target, "requestBody": dict(body)}
            for link, (target, body) in LINKS.get(spec.name, {}).items()
            if target in names
        }
        if links:
            op["responses"]["200"]["links"] = links
        paths[v1_tool_path(spec.name)] = {"post": op}
    return paths


#: `GET /v1/tools`'s answer.
TOOL_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "MCP tools/list's result for this caller and surface.",
    "properties": {
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "inputSchema": {"type": "object"},
                    "annotations": {"type": "object"},
                },
                "required": ["name", "inputSchema"],
            },
        }
    },
    "required": ["tools"],
}


def _shared_schemas(schemas: dict[str, Any]) -> dict[str, Any]:
    """The schemas every operation shares: the error envelope (its `$defs` hoisted into `schemas`),
    the dry-run answer and the tool list."""
    envelope = _hoist(ErrorEnvelope.model_json_schema(by_alias=True), "ErrorEnvelope", schemas)
    return {"ErrorEnvelope": envelope, "DryRunResult": DRY_RUN_SCHEMA, "ToolList": TOOL_LIST_SCHEMA}


def _error_responses() -> dict[str, Any]:
    """One response per error status, each the `ErrorEnvelope` (with `Retry-After` on 429/503)."""
    return {
        f"Error{status}": {
            "description": why,
            "headers": {
                CORRELATION_HEADER: {"$ref": "#/components/headers/CorrelationId"},
                **({"Retry-After": {"$ref": "#/components/headers/RetryAfter"}} if status in ("429", "503") else {}),
            },
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
        }
        for status, why in ERROR_RESPONSES.items()
    }


def _components(schemas: dict[str, Any]) -> dict[str, Any]:
    return {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "A fleetmem API token (`fleetmem token create`) or, on AWS, a Cognito "
                "access token. Its scopes (read, write, admin) decide which operations answer.",
            }
        },
        "headers": {
            "CorrelationId": {
                "description": "The call's correlation id (also in the body's error envelope).",
                "schema": {"type": "string"},
            },
            "RetryAfter": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}},
        },
        "responses": _error_responses(),
        "schemas": schemas,
    }


def _get_operation(
    operation_id: str, summary: str, answer: str, schema: dict[str, Any], errors: dict[str, Any]
) -> dict[str, Any]:
    """A `GET` route of `/v1` beside the tools: any credential, a JSON answer of `schema`."""
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": answer, "content": {"application/json": {"schema": schema}}},
                **errors,
            },
        }
    }
