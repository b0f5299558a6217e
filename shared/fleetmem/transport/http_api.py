"""The plain HTTP API beside MCP: `POST /v1/<tool>`, `GET /v1/tools` and `GET /v1/openapi.json`.

Both deployments answer it with the same pieces: the local server (`fleetmem serve`, routes added
to the MCP app in `mcp_app.build_mcp_app`) and the API on AWS (`POST /v1/{tool}` goes straight to
the tool's function, `transport.aws_lambda.tools`; `/v1/tools` and `/v1/openapi.json` to the edge
function, which runs the same app). Every call goes through the one `dispatch()`, every error is
the one envelope (`memory.envelope.build_envelope`), and this module is the ONE place that turns a
`DispatchResult` into an HTTP answer (`v1_answer`) and the one handler of `POST /v1/<tool>`
(`answer_v1`); codes map to statuses in `fleetmem.contract.status`, paths in `contract.routes`.

The OpenAPI 3.1 document is generated here from the registry (`openapi_document`): one operation
per tool, its request body the tool's inputSchema (what MCP tools/list shows), its 200 the tool's
result model, every error the shared `ErrorEnvelope` component. It is never written by hand.

Light at import (stdlib, pydantic and fleetmem's own envelope/registry modules): a tool function
imports it for `answer_v1`; the document's generator imports the MCP SDK only when called.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable, Collection, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.result import DispatchResult, error_result
from fleetmem.contract.routes import OPENAPI_PATH, TOOLS_PATH, V1_TRANSPORT, v1_tool_path
from fleetmem.contract.status import CORRELATION_HEADER, error_headers, status_for
from fleetmem.errors import Fix, VerbError
from fleetmem.memory.envelope import order_notices, render_notice_meta
from fleetmem.models import Caller
from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION, SERVER_NAME, Surface

if TYPE_CHECKING:
    from fleetmem.memory.registry import ToolSpec

log = logging.getLogger("fleetmem.transport.http")

#: How `answer_v1` runs one call: `(tool, arguments, caller, correlation_id) -> DispatchResult`.
CallFn = Callable[[str, Any, Caller, str], DispatchResult]


def v1_answer(
    result: DispatchResult, *, callable_tools: Collection[str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """THE mapping of one dispatch result to `(status, body, headers)` for `POST /v1/<tool>`.

    Success: 200 and the tool's body (the same as MCP's `structuredContent`), with the notices MCP
    puts in `_meta["fleetmem/notices"]` under `notices` when there are any. Error: the envelope
    with its status (`status_for`). `X-Correlation-Id` on both."""
    body = dict(result.body)
    if result.is_error:
        return status_for(str(body.get("code") or "")), body, error_headers(body)
    if result.notices:
        body["notices"] = [
            render_notice_meta(n, V1_TRANSPORT, callable_tools=callable_tools) for n in order_notices(result.notices)
        ]
    return 200, body, {CORRELATION_HEADER: result.correlation_id}


def answer_v1(
    tool: str,
    raw_body: bytes,
    caller: Caller,
    call: CallFn,
    *,
    surface: Surface,
    correlation_id: str | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """THE handler of `POST /v1/<tool>` for an authenticated caller, on the local server and on
    Lambda: the body parsed as the tool's arguments (a body that is not JSON is `invalid_params`),
    the call run by `call` (the deployment's way to `dispatch()`), the answer by `v1_answer`. An
    exception of `call` is the `internal` answer (`dispatch.guarded`)."""
    from fleetmem.memory.registry import tools_for

    cid = correlation_id or new_correlation_id()
    try:
        arguments = read_arguments(tool, raw_body)
    except VerbError as err:
        return v1_answer(error_result(err, tool=tool, correlation_id=cid, transport=V1_TRANSPORT))
    from fleetmem.transport.dispatch import guarded

    run = partial(call, tool, arguments, caller, cid)
    result = guarded(run, tool, cid, transport=V1_TRANSPORT, event="edge_internal_error")
    return v1_answer(result, callable_tools={s.name for s in tools_for(surface, caller)})


def read_arguments(tool: str, raw_body: bytes) -> Any:
    """A `/v1` body as the tool's arguments; raises the `too_deep_body` refusal on a body nested
    deeper than `MAX_JSON_DEPTH` and the `not_json_body` refusal on a body that is not JSON (or not
    UTF-8)."""
    try:
        return parse_arguments(raw_body)
    except TooDeep:
        raise too_deep_body(tool) from None
    except ValueError:  # also a body that is not UTF-8
        raise not_json_body(tool) from None


def too_deep_body(tool: str) -> VerbError:
    """The refusal of a `/v1` body nested deeper than any tool's arguments are."""
    where = v1_tool_path(tool[:64])
    return VerbError(
        "invalid_params",
        f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.",
        f"Problem: the body of POST {where} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep. "
        "Cause: tool arguments are flat (a few levels at most), so such a body is never read. Fix: send the "
        "tool's arguments as one flat JSON object, as GET /v1/tools describes them.",
        detail={"reason": "too_deep", "max_depth": MAX_JSON_DEPTH},
        fix=Fix(why="Send the tool's arguments as one JSON object of the shape its inputSchema gives."),
        klass="caller",
    )


def not_json_body(tool: str) -> VerbError:
    """The refusal of a `/v1` body that is not one JSON object in UTF-8."""
    where = v1_tool_path(tool[:64])
    return VerbError(
        "invalid_params",
        "The request body is not valid JSON.",
        f"Problem: the body of POST {where} could not be parsed. Cause: it is not one "
        "JSON object in UTF-8. Fix: send the tool's arguments as a JSON object, e.g. {}.",
        fix=Fix(why="Send the tool's arguments as one JSON object with Content-Type: application/json."),
        klass="caller",
    )


def is_json_content_type(value: str | None) -> bool:
    """A `Content-Type` that declares JSON (`application/json`, any parameters)."""
    return (value or "").split(";", 1)[0].strip().lower() == "application/json"


def not_json_error(where: str) -> VerbError:
    """The refusal of a POST whose body is not declared as JSON (a form, text, nothing): every POST
    this server reads is JSON, on /mcp and /v1, locally and on AWS."""
    return VerbError(
        "invalid_params",
        f"{where} needs `Content-Type: application/json`.",
        "Problem: the request body is not declared as JSON. Cause: every POST to this server (MCP's "
        "JSON-RPC messages and /v1 tool arguments) is a JSON body, and a form or text body is never "
        "read as one. Fix: send `Content-Type: application/json`.",
        fix=Fix(why="Send the JSON body with `Content-Type: application/json`."),
        klass="caller",
    )


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("a number too large for JSON")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The deepest nesting of arrays and objects a `/v1` body may have. Tool arguments nest three levels
#: at most (put_page's `links`: object, list, object); a body far deeper would only reach the
#: recursion limit of the parser or of the code that reads the arguments (an `internal` answer, or
#: none at all), so it is refused up front.
MAX_JSON_DEPTH = 32


class TooDeep(ValueError):
    """A JSON text nested deeper than `MAX_JSON_DEPTH`."""


def _depth_over(value: Any, limit: int) -> bool:
    """True when `value` nests arrays/objects more than `limit` levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_arguments(raw: bytes) -> Any:
    """The request body as JSON (empty: `{}`); raises ValueError on anything RFC 8259 does not
    allow, including `NaN`/`Infinity` and numbers that overflow to infinity, which Python's parser
    would otherwise accept and no JSON answer could echo back, and `TooDeep` (a ValueError) on a body
    nested deeper than `MAX_JSON_DEPTH` — also when it is too deep for the parser itself
    (`RecursionError`, which is not a ValueError)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise TooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _depth_over(value, MAX_JSON_DEPTH):
        raise TooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def render_json(body: Any) -> bytes:
    """A JSON answer's bytes: UTF-8, with JSON escapes where a string cannot travel as UTF-8."""
    text = json.dumps(body, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body).encode()


def tools_document(surface: Surface, caller: Any) -> dict[str, Any]:
    """`GET /v1/tools`: exactly MCP tools/list's result for this caller on this surface."""
    from fleetmem.transport.listing import list_tool_definitions

    tools = list_tool_definitions(surface, caller)
    return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]}


# ---------------------------------------------------------------------------------------------
# The error envelope as a schema (AGENT_OPERATOR "The error envelope"; built by build_envelope)


class RenderedFix(BaseModel):
    """The envelope's `fix`: the next step, rendered for the caller's transport."""

    model_config = ConfigDict(extra="allow")

    mcp: dict[str, Any] | None = None
    argv: list[str] | None = None
    command: str | None = None
    consent: list[str]
    actor: str = Field(min_length=1)
    next: str = Field(min_length=1)
    why: str = Field(min_length=1)
    verify: Any = None
    retry_after_seconds: int | None = None
    user_message: str | None = None
    inputs: list[dict[str, Any]] | None = None
    requires_exclusive: bool


class ErrorEnvelope(BaseModel):
    """Every non-2xx body of the HTTP API (and every MCP error result): what failed (`message`),
    what to do (`suggestion`, never empty) and the runnable next step (`fix`)."""

    model_config = ConfigDict(extra="forbid")

    error: str = Field(min_length=1)
    code: str = Field(min_length=1)
    message: str = Field(min_length=1)
    suggestion: str = Field(min_length=1)
    why: str | None = None
    detail: Any = None
    fix: RenderedFix
    class_: str = Field(alias="class", min_length=1)
    retryable: bool
    notices: list[dict[str, Any]] | None = None
    protocol_version: int
    contract_version: int
    correlation_id: str = Field(min_length=1)


# ---------------------------------------------------------------------------------------------
# The OpenAPI document

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
    `#/$defs/X` reference rewritten to `#/components/schemas/<name>.<X>`; returns a copy."""
    schema = copy.deepcopy(schema)
    defs = schema.pop("$defs", {})

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                m = _REF.match(v) if k == "$ref" and isinstance(v, str) else None
                out[k] = f"#/components/schemas/{name}.{m.group(1)}" if m else rewrite(v)
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for def_name, def_schema in defs.items():
        components[f"{name}.{def_name}"] = rewrite(def_schema)
    return rewrite(schema)


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
    from fleetmem.memory.registry import on_surface
    from fleetmem.memory.verbs import REGISTRY

    every = tools if tools is not None else REGISTRY.values()
    specs = [s for s in every if on_surface(s, surface)]
    schemas: dict[str, Any] = {}
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
    envelope = _hoist(ErrorEnvelope.model_json_schema(by_alias=True), "ErrorEnvelope", schemas)
    schemas["ErrorEnvelope"] = envelope
    schemas["DryRunResult"] = DRY_RUN_SCHEMA
    schemas["ToolList"] = {
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
    error_responses = {
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
        "components": {
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
            "responses": error_responses,
            "schemas": schemas,
        },
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
