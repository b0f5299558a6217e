"""The direct answer to a stateless, JSON-response `tools/call` of the handshake era.

In stateless mode the `mcp` SDK builds, for every POST, a transport, its memory streams, a
JSON-RPC dispatcher and a server task; for a verb that takes microseconds that machinery is most of
the call (docs/benchmarks.md, "The per-call floor"). `FastToolCalls` answers the one request shape
that dominates traffic — a single JSON-RPC request whose method is `tools/call`, without an
`MCP-Protocol-Version` header or with one of the handshake-era versions — with the SDK's own
steps, in the SDK's order, without that machinery:

1. the body parsed and validated as a JSON-RPC message (`pydantic_core.from_json`,
   `jsonrpc_message_adapter`), the params checked for the protocol version
   (`methods.validate_client_request`) and validated as the registered handler's params type;
2. the handler the server registered for `tools/call` (`mcp_app.ToolCalls`) run with the request;
3. its result sieved for the version (`methods.serialize_server_result`, over the result's frame
   only: `sieved_result`) and framed as the `JSONRPCResponse` the SDK writes, in the same
   `Response` (status, headers, bytes); the answer's body is serialised once, there.

Anything else — a notification, a batch, another method, a 2026-era request, params the SDK would
refuse — returns None BEFORE any tool runs, and the SDK answers it as always. The answer is the
same bytes the SDK sends (tests/transport/test_fast_call.py sends the same requests through both).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

import pydantic_core
from mcp.server.lowlevel.server import Server
from mcp.server.runner import _dump_result
from mcp.server.streamable_http import CONTENT_TYPE_JSON
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    TextContent,
    jsonrpc_message_adapter,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

log = logging.getLogger("fleetmem.transport.mcp")

METHOD = "tools/call"


@dataclass(frozen=True)
class _Context:
    """What `ToolCalls` reads of the SDK's request context: the HTTP request (its ASGI scope holds
    the caller the guard put there)."""

    request: Request
    method: str = METHOD


class FastToolCalls:
    """`answer(raw, request)`: the SDK's answer to a handshake-era `tools/call`, or None to let the
    SDK answer. Built over the finished server, so it runs the handler the server registered."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def answer(self, raw: bytes, request: Request) -> Response | None:
        if not all(_passes_tools_call(m) for m in self.server.middleware):
            return None  # a middleware that may act on tools/call: only the SDK runs it
        if b'"tools/call"' not in raw:
            return None  # not a plain tools/call (an escaped spelling still reaches the SDK): no second parse
        content_type = request.headers.get("content-type", "")
        if CONTENT_TYPE_JSON not in (part.strip() for part in content_type.split(";")[0].split(",")):
            return None  # the SDK transport's own, case-sensitive Content-Type rule answers 415
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None  # the 2026-era entry classifies and validates its own headers
        entry = self.server.get_request_handler(METHOD)
        if entry is None or self.server.cache_hints.get(METHOD) is not None:
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(raw), by_name=False)
        except ValueError:
            return None  # the SDK's parse or validation error
        if not isinstance(message, JSONRPCRequest) or message.method != METHOD:
            return None
        version = version or DEFAULT_NEGOTIATED_VERSION
        params = message.params
        try:
            _methods.validate_client_request(METHOD, version, params)
            typed = entry.params_type.model_validate({} if params is None else params, by_name=False)
        except (KeyError, ValueError):
            return None  # the SDK's INVALID_PARAMS / METHOD_NOT_FOUND
        # From here the tool has run: the answer is framed here, as the SDK frames it, never retried.
        # the handler reads only the request of its context (`ToolCalls`): a stand-in carries just that
        result = await entry.handler(cast(Any, _Context(request)), typed)
        body: JSONRPCResponse | JSONRPCError
        if isinstance(result, ErrorData):  # the SDK raises it as MCPError; the dispatcher writes it
            body = JSONRPCError(jsonrpc="2.0", id=message.id, error=result)
        else:
            try:
                dumped = sieved_result(result, version)
            except ValidationError:
                log.exception("handler for %r returned an invalid result", METHOD)
                invalid = ErrorData(code=INTERNAL_ERROR, message="Handler returned an invalid result")
                body = JSONRPCError(jsonrpc="2.0", id=message.id, error=invalid)
            else:
                body = JSONRPCResponse(jsonrpc="2.0", id=message.id, result=dumped)
        return Response(
            body.model_dump_json(by_alias=True, exclude_unset=True),
            status_code=200,
            headers={"Content-Type": CONTENT_TYPE_JSON},
        )


def sieved_result(result: Any, version: str) -> dict[str, Any]:
    """`serialize_server_result(METHOD, version, _dump_result(result))` without walking the answer's
    body three more times: the version's sieve runs over the result's frame (every text block's
    text blanked, `structuredContent` an empty object), and the text and the body are put back
    unchanged into the sieved frame, where `model_dump_json` of the response serialises them once.
    Both were validated when the result was built (`str`, `dict[str, Any]`), and the sieve neither
    changes a string nor looks inside `structuredContent`, so the bytes are the SDK's
    (tests/transport/test_serialise_once.py). Anything else takes the SDK's own steps."""
    if not isinstance(result, CallToolResult):
        return _methods.serialize_server_result(METHOD, version, _dump_result(result))
    texts = [c.text if isinstance(c, TextContent) else None for c in result.content]
    body = result.structured_content
    frame = result.model_copy(
        update={
            "content": [
                c if t is None else c.model_copy(update={"text": ""})
                for c, t in zip(result.content, texts, strict=True)
            ],
            "structured_content": None if body is None else {},
        }
    )
    dumped = _methods.serialize_server_result(METHOD, version, _dump_result(frame))
    content = dumped.get("content")
    if not isinstance(content, list) or len(content) != len(texts):
        return _methods.serialize_server_result(METHOD, version, _dump_result(result))  # a sieve that reshapes
    for item, text in zip(content, texts, strict=True):
        if text is not None:
            item["text"] = text
    if body is not None and "structuredContent" in dumped:
        dumped["structuredContent"] = body
    return dumped


def _passes_tools_call(middleware: Any) -> bool:
    """The server middleware a `tools/call` may skip: one that declares the methods it acts on
    (`acts_on`, as `mcp_app.CallerInstructions` does) without `tools/call`, and the SDK's
    OpenTelemetry span (a no-op without a tracer provider, which fleetmem never configures)."""
    acts_on = getattr(middleware, "acts_on", None)
    if isinstance(acts_on, frozenset):
        return METHOD not in acts_on
    return type(middleware).__name__ == "OpenTelemetryMiddleware"
