"""The MCP edge: the `mcp` SDK's low-level server, stateless, JSON responses, at `POST /mcp`, and
the app that serves it behind the guard (`guard.EdgeGuard`) with the routes beside it
(`app_routes`: `/health`, the protected-resource metadata, `/v1`).

One app serves both protocol eras (the SDK routes them): handshake clients (`initialize`,
2025-06-18 / 2025-11-25) and 2026-07-28 stateless clients (`server/discover`, `Mcp-Method` /
`Mcp-Name` headers). tools/list comes from the registry filtered by surface and the caller's scopes;
tools/call (`ToolCalls`) goes to an invoker (in-process locally, one Lambda per verb on AWS) that
runs `dispatch`. Malformed JSON-RPC and unknown methods stay JSON-RPC errors (the SDK answers them,
or `jsonrpc.jsonrpc_refusal` before it).

Result framing (D28): success -> exactly one text block, the body as JSON text with its notices
inside under `notices` (absent when none), `structuredContent` = the same document, and the notices
mirrored under `_meta["fleetmem/notices"]` and `_meta["gbrain_notices"]`; error -> `isError: true`
and exactly one text block, the envelope (its notices under its own `notices`). A client that joins
every text block of a result parses one JSON document either way.

`initialize` and `server/discover` answer with instructions written for the caller's surface and
scopes (`fleetmem.transport.instructions`, D29).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute

import fleetmem
from fleetmem.config import mcp_instructions_from_env
from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.envelope import NOTICES_KEY, NOTICES_META_KEY, REFERENCE_NOTICES_META_KEY, with_notices
from fleetmem.contract.invoker import Invoker
from fleetmem.contract.result import DispatchResult, error_result
from fleetmem.contract.routes import MCP_PATH, V1_TRANSPORT
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import SERVER_NAME, Surface, Transport
from fleetmem.transport.app_routes import AppRoutes
from fleetmem.transport.callers import (
    CALLER_SCOPE_KEY,
    PUBLIC_URL_SCOPE_KEY,
    CallerFromContext,
    CallerFromRequest,
    bearer_caller,
    gateway_caller,
)
from fleetmem.transport.dispatch import internal_answer, visible_tools
from fleetmem.transport.fast_call import FastToolCalls
from fleetmem.transport.guard import LOOPBACK_HOSTS, LOOPBACK_SECURITY, EdgeGuard
from fleetmem.transport.http_api import render_json
from fleetmem.transport.instructions import server_instructions
from fleetmem.transport.invoker import EdgeCalls, InProcessInvoker
from fleetmem.transport.listing import TOOLS_LIST_CACHE, list_tool_definitions, tool_input_schema
from fleetmem.transport.quick_calls import QuickCalls, kind_of
from fleetmem.transport.refusals import DEFAULT_TOKEN_COMMAND, MAX_REQUEST_BYTES, unauthorized_error

#: Names other modules and tests import from here (the app's front door).
__all__ = [
    "DEFAULT_TOKEN_COMMAND",
    "MAX_REQUEST_BYTES",
    "PUBLIC_URL_SCOPE_KEY",
    "ToolCalls",
    "bearer_caller",
    "build_mcp_app",
    "build_mcp_server",
    "gateway_caller",
    "list_tool_definitions",
    "to_call_tool_result",
    "tool_input_schema",
    "unauthorized_error",
]

log = logging.getLogger("fleetmem.transport.mcp")

# ---------------------------------------------------------------------------------------------
# tools/list and tools/call


def _text(value: dict[str, Any]) -> str:
    # An unpaired surrogate cannot travel as UTF-8; render_json falls back to JSON escapes.
    return render_json(value).decode("utf-8")


def to_call_tool_result(
    result: DispatchResult, *, transport: Transport = "mcp", callable_tools: set[str] | None = None
) -> types.CallToolResult:
    if result.is_error:
        return types.CallToolResult(content=[types.TextContent(type="text", text=_text(result.body))], is_error=True)
    body = with_notices(result.body, result.notices, transport, callable_tools=callable_tools)
    notices = body.get(NOTICES_KEY)
    meta = {NOTICES_META_KEY: notices, REFERENCE_NOTICES_META_KEY: notices} if notices else None
    content: list[Any] = [types.TextContent(type="text", text=_text(body))]
    return types.CallToolResult(content=content, structured_content=body, is_error=False, _meta=meta)


def _error_result(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_text(body))], is_error=True)


class ToolCalls:
    """tools/call: the caller from the request (`caller_of`), the surface/scope gate, the call on a
    worker thread through the invoker (`limiter` bounds them), the result framed for MCP. Any
    exception is the `internal` answer: the SDK never turns an exception's text into a result."""

    def __init__(self, calls: EdgeCalls, caller_of: CallerFromContext) -> None:
        self.calls = calls
        self.caller_of = caller_of

    async def __call__(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        cid = new_correlation_id()
        try:
            return await self._call(ctx, params.name, with_request_meta(params.arguments, params.meta), cid)
        except Exception as exc:
            answer = internal_answer(params.name, cid, exc, transport="mcp", event="edge_internal_error")
            return _error_result(answer.body)

    async def _call(self, ctx: Any, tool: str, arguments: dict[str, Any] | None, cid: str) -> types.CallToolResult:
        caller = self.caller_of(ctx)
        if caller is None:
            refused = error_result(
                unauthorized_error(token_presented=False),
                tool=tool,
                arguments=arguments,
                correlation_id=cid,
                transport="mcp",
            )
            return _error_result(refused.body)
        calls = self.calls
        gate = calls.gate(tool, arguments, caller, cid)
        if gate is not None:
            return _error_result(gate.body)
        kind = kind_of(tool, arguments)
        result = await calls.run(kind, calls.invoker.invoke, tool, arguments, caller, cid)
        allowed = {s.name for s in visible_tools(calls.surface, caller)}
        return to_call_tool_result(result, callable_tools=allowed)


def with_request_meta(arguments: dict[str, Any] | None, meta: Any) -> dict[str, Any] | None:
    """The arguments with the request's `_meta.session_id` under their own `_meta` (D24), the one
    way `_meta` travels to `dispatch` (through any invoker); the request's value wins."""
    session = meta.get("session_id") if isinstance(meta, dict) else None
    if not isinstance(session, str) or not isinstance(arguments, dict | None):
        return arguments
    args = dict(arguments or {})
    inner = args.get("_meta")
    args["_meta"] = {**(inner if isinstance(inner, dict) else {}), "session_id": session}
    return args


def scope_caller(ctx: Any) -> Caller | None:
    """The caller the HTTP guard put in the request's ASGI scope."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    return scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None


#: The methods whose answer carries the server instructions, in each era (D29).
INSTRUCTION_METHODS = frozenset({"initialize", "server/discover"})


class CallerInstructions:
    """A server middleware (the SDK's hook around every request, `initialize` included) that puts
    the instructions written for this request's caller and surface into the `initialize` and
    `server/discover` answers (D29); every other request passes through untouched."""

    #: the only methods whose answers it changes (`fast_call` skips it for any other)
    acts_on = INSTRUCTION_METHODS

    def __init__(self, surface: Surface, caller_of: CallerFromContext, operator: str | None) -> None:
        self.surface = surface
        self.caller_of = caller_of
        self.operator = operator

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method in self.acts_on and isinstance(result, dict):
            result = {**result, "instructions": server_instructions(self.surface, self.caller_of(ctx), self.operator)}
        return result


def build_mcp_server(
    invoker: Invoker,
    *,
    surface: Surface = "full",
    caller_from_context: CallerFromContext | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    token_inputs: Sequence[Mapping[str, str]] = (),
    operator_instructions: str | None = None,
    quick: QuickCalls | None = None,
) -> Server:
    """The SDK server. The caller is read per request: by default from the ASGI scope, where the
    HTTP wrapper put the authenticated `Caller`; in-memory tests pass `caller_from_context`.
    `limiter` bounds the threads that run tool calls at once (None: anyio's default of 40).
    `operator_instructions` follows the operating contract (None: `$FLEETMEM_MCP_INSTRUCTIONS`).
    `quick` (in-process invokers only): reads proven quick run on the event loop (`quick_calls`)."""
    caller_of = caller_from_context or scope_caller

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list_tool_definitions(surface, caller_of(ctx)))

    calls = EdgeCalls(invoker, surface, limiter, tuple(token_command), tuple(token_inputs), quick)
    on_call_tool = ToolCalls(calls, caller_of)
    operator = operator_instructions if operator_instructions is not None else mcp_instructions_from_env()
    server = Server(
        SERVER_NAME,
        version=fleetmem.__version__,
        # What a request without a caller would read; every answer is rewritten per caller (D29).
        instructions=server_instructions(surface, None, operator),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=tool_input_schema(surface),
        cache_hints={"tools/list": TOOLS_LIST_CACHE},
    )
    server.middleware.append(CallerInstructions(surface, caller_of, operator))
    return server


def build_mcp_app(
    deps_factory: Callable[[], Deps] | None,
    *,
    surface: Surface = "full",
    caller_from_request: CallerFromRequest,
    behind_gateway: bool = False,
    invoker: Invoker | None = None,
    authorization_server: str | None = None,
    public_url: str | None = None,
    host: str = "127.0.0.1",
    token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    token_inputs: Sequence[Mapping[str, str]] = (),
    call_threads: int | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    fast_calls: bool = True,
    quick_calls: bool = True,
) -> Starlette:
    """A Starlette app serving POST /mcp (both eras), /health and the protected-resource document.

    `token_command` is the command a 401's fix names (it must mint a token in the store this server
    reads); `token_inputs` names any `<placeholder>` in it (AGENT_OPERATOR `inputs`).

    `invoker` defaults to an `InProcessInvoker` over `deps_factory`. Behind API Gateway, DNS-rebinding
    protection is off (the gateway's Host header is not localhost); locally it is on.
    The SDK's session manager runs once per app: a host keeps the app's lifespan open for as long
    as it serves (the Lambda edge does so for the life of its sandbox, `aws_lambda.edge`).

    `call_threads` bounds the worker threads that authenticate and run calls at once (None:
    anyio's default of 40). On a GIL-bound server more threads than cores mostly contend: with 32
    clients on two cores, 8 threads served a mixed load faster than 40 (README, "Fleet
    throughput"); calls beyond the bound wait their turn, none is refused.

    `fast_calls` (default on): a handshake-era `tools/call` is answered by `fast_call.FastToolCalls`,
    the same bytes as the SDK's answer without its per-request transport (off: the SDK answers
    every request, as tests that compare the two do).

    `quick_calls` (default on; in-process invokers only): a read whose kind has proven quick runs
    on the event loop instead of a worker thread (`quick_calls.QuickCalls`)."""
    v1_invoker: Invoker | None = None
    quick: QuickCalls | None = None
    if invoker is None:
        if deps_factory is None:
            raise ValueError("build_mcp_app needs deps_factory or invoker")
        invoker = InProcessInvoker(deps_factory, surface=surface)
        v1_invoker = InProcessInvoker(deps_factory, surface=surface, transport=V1_TRANSPORT)
        quick = QuickCalls() if quick_calls else None
    limiter = anyio.CapacityLimiter(call_threads) if call_threads else None
    calls = EdgeCalls(invoker, surface, limiter, tuple(token_command), tuple(token_inputs), quick)
    v1_calls = dataclasses.replace(calls, invoker=v1_invoker) if v1_invoker is not None else None
    server = build_mcp_server(
        invoker, surface=surface, limiter=limiter, token_command=token_command, token_inputs=token_inputs, quick=quick
    )
    routes = AppRoutes(calls, authorization_server=authorization_server, public_url=public_url, v1_calls=v1_calls)
    security: TransportSecuritySettings | None = None  # off on another bind, as the SDK has it
    if behind_gateway:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    elif host in LOOPBACK_HOSTS:
        security = LOOPBACK_SECURITY
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
        max_request_body_size=MAX_REQUEST_BYTES,
        custom_starlette_routes=[*routes.routes(), *extra_routes],  # type: ignore[list-item]
    )
    app.add_middleware(
        EdgeGuard,
        calls=calls,
        caller_from_request=caller_from_request,
        public_url=public_url,
        security=security,
        fast_calls=FastToolCalls(server) if fast_calls else None,
    )
    return app
