"""The MCP edge: the `mcp` SDK's low-level server, stateless, JSON responses, at `POST /mcp`.

One app serves both protocol eras (the SDK routes them): handshake clients (`initialize`,
2025-06-18 / 2025-11-25) and 2026-07-28 stateless clients (`server/discover`, `Mcp-Method` /
`Mcp-Name` headers). tools/list comes from the registry filtered by surface and the caller's scopes;
tools/call goes to an invoker (in-process locally, one Lambda per verb on AWS) that runs `dispatch`.

Around the SDK app (PROTOCOL_NOTES §1, §10):
- `GET /mcp` (and any other non-POST) -> 405: the SDK would open an event stream that never ends.
- `POST /mcp` without `Accept: application/json, text/event-stream` -> 406.
- no / unknown / revoked token -> 401, `WWW-Authenticate: Bearer resource_metadata="…"` and an
  `unauthorized` envelope from the one builder.
- `/health`, and the OAuth protected-resource metadata document at
  `/.well-known/oauth-protected-resource` (and `…/mcp`).
Malformed JSON-RPC and unknown methods stay JSON-RPC errors (the SDK answers them).

Result framing: success -> `content[0]` = the body as JSON text (byte-identical with or without
notices), `structuredContent` = the body, one extra text block per notice, and
`_meta["fleetmem/notices"]`; error -> `isError: true` and exactly one text block, the envelope.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import fleetmem
from fleetmem.errors import Fix, VerbError
from fleetmem.memory.envelope import (
    NOTICES_META_KEY,
    build_envelope,
    internal_envelope,
    order_notices,
    render_notice_block,
    render_notice_meta,
)
from fleetmem.memory.registry import ToolSpec
from fleetmem.models import Caller
from fleetmem.ports import Auth, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SCOPES, SERVER_NAME, Surface
from fleetmem.transport.dispatch import DispatchResult, precheck, visible_tools
from fleetmem.transport.gateway import caller_from_authorizer
from fleetmem.transport.invoker import InProcessInvoker, Invoker
from fleetmem.transport.logs import correlation, new_correlation_id

log = logging.getLogger("fleetmem.transport.mcp")

MCP_PATH = "/mcp"
CALLER_SCOPE_KEY = "fleetmem.caller"
PRM_PATH = "/.well-known/oauth-protected-resource"

CallerFromRequest = Callable[[Request], Caller | None]
CallerFromContext = Callable[[Any], Caller | None]

IDEMPOTENCY_KEY_SCHEMA = {
    "type": "string",
    "maxLength": 200,
    "description": "Optional. A unique string per logical write (e.g. a UUID). A retry with the same key "
    "and the same arguments within 24 h returns the first result with "
    "idempotent_replay: true instead of writing again.",
}


# ---------------------------------------------------------------------------------------------
# tools/list and tools/call


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    schema = spec.input_schema()
    if spec.idempotency and "idempotency_key" not in schema["properties"]:
        schema = {**schema, "properties": {**schema["properties"], "idempotency_key": IDEMPOTENCY_KEY_SCHEMA}}
    return schema


def tool_definition(spec: ToolSpec) -> types.Tool:
    annotations = types.ToolAnnotations.model_validate(spec.annotations) if spec.annotations else None
    return types.Tool(
        name=spec.name, description=spec.description, input_schema=tool_schema(spec), annotations=annotations
    )


def list_tool_definitions(surface: Surface, caller: Caller | None) -> list[types.Tool]:
    if caller is None:
        return []
    return [tool_definition(s) for s in visible_tools(surface, caller)]


def _text(value: dict[str, Any]) -> str:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # An unpaired surrogate cannot travel as UTF-8; JSON escapes keep the document valid.
        text = json.dumps(value)
    return text


def to_call_tool_result(
    result: DispatchResult, *, transport: str = "mcp", callable_tools: set[str] | None = None
) -> types.CallToolResult:
    if result.is_error:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_text(result.body))], is_error=True
        )
    content: list[Any] = [types.TextContent(type="text", text=_text(result.body))]
    meta = None
    if result.notices:
        ordered = order_notices(result.notices)
        content.extend(
            types.TextContent(
                type="text", text=render_notice_block(n, transport, callable_tools=callable_tools)
            )
            for n in ordered
        )
        meta = {
            NOTICES_META_KEY: [
                render_notice_meta(n, transport, callable_tools=callable_tools) for n in ordered
            ]
        }
    return types.CallToolResult(content=content, structured_content=result.body, is_error=False, _meta=meta)


def _error_result(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_text(body))], is_error=True)


def unauthorized_error(*, token_presented: bool) -> VerbError:
    return VerbError(
        "unauthorized",
        "The token is missing, unknown or revoked." if token_presented else "No bearer token was sent.",
        "Send `Authorization: Bearer <token>` with a valid fleetmem token; the memory host's operator "
        "creates one with the command below.",
        why="Every MCP call is authenticated; the tenant and scopes come from the token.",
        fix=Fix(
            why="Mints a token for one client; it is printed once.",
            argv=["fleetmem", "token", "create", "--client", "my-agent", "--scopes", "read,write"],
            actor="host_admin",
            user_message="The memory server did not accept my token. Its operator can create one with "
            "`fleetmem token create --client NAME --scopes read,write`; add it to my MCP "
            "configuration as an Authorization: Bearer header.",
        ),
    )


def build_mcp_server(
    invoker: Invoker, *, surface: Surface = "full", caller_from_context: CallerFromContext | None = None
) -> Server:
    """The SDK server. The caller is read per request: by default from the ASGI scope, where the
    HTTP wrapper put the authenticated `Caller`; in-memory tests pass `caller_from_context`."""

    def caller_of(ctx: Any) -> Caller | None:
        if caller_from_context is not None:
            return caller_from_context(ctx)
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        return scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list_tool_definitions(surface, caller_of(ctx)))

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        cid = new_correlation_id()
        tool = params.name
        try:
            caller = caller_of(ctx)
            if caller is None:
                body = build_envelope(
                    unauthorized_error(token_presented=False),
                    tool=tool,
                    arguments=params.arguments,
                    correlation_id=cid,
                    transport="mcp",
                )
                return _error_result(body)
            gate = precheck(tool, params.arguments, caller, surface=surface, correlation_id=cid)
            if gate is not None:
                return _error_result(gate.body)
            result = await anyio.to_thread.run_sync(invoker.invoke, tool, params.arguments, caller, cid)
            allowed = {s.name for s in visible_tools(surface, caller)}
            return to_call_tool_result(result, callable_tools=allowed)
        except Exception as exc:  # never let the SDK turn an exception's text into a result
            with correlation(cid):
                log.error(
                    "tool call failed at the edge",
                    extra={
                        "event": "edge_internal_error",
                        "tool": str(tool)[:64],
                        "exc_type": type(exc).__name__,
                    },
                )
            return _error_result(internal_envelope(cid, str(tool)))

    return Server(
        SERVER_NAME,
        version=fleetmem.__version__,
        instructions="Long-term memory for AI agents (MEMORY_VERBS v1). Read the tool descriptions; "
        "every error carries a `fix` with the next step.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


# ---------------------------------------------------------------------------------------------
# HTTP


def public_base_url(request: Request, configured: str | None = None) -> str:
    if configured:
        return configured.rstrip("/")
    proto = request.headers.get("x-forwarded-proto") or request.url.scheme
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or request.url.netloc
    return f"{proto}://{host}"


def resource_metadata_url(base: str) -> str:
    return f"{base}{PRM_PATH}{MCP_PATH}"


def protected_resource_document(base: str, authorization_server: str | None) -> dict[str, Any]:
    return {
        "resource": f"{base}{MCP_PATH}",
        "authorization_servers": [authorization_server or base],
        "scopes_supported": list(SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": SERVER_NAME,
    }


def _refusal(status: int, message: str, suggestion: str, *, headers: dict[str, str] | None = None) -> Response:
    """An HTTP-level refusal (wrong method, wrong Accept) as the same envelope every error uses."""
    body = build_envelope(
        VerbError("invalid_params", message, suggestion, klass="caller"),
        tool="",
        arguments={},
        correlation_id=new_correlation_id(),
        transport="http",
    )
    return JSONResponse(body, status_code=status, headers=headers)


class _EdgeGuard:
    """Pure-ASGI guard in front of the SDK's /mcp handler: method, Accept, authentication."""

    def __init__(
        self, app: ASGIApp, *, caller_from_request: CallerFromRequest, public_url: str | None
    ) -> None:
        self.app = app
        self.caller_from_request = caller_from_request
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        if request.method != "POST":
            await _refusal(
                405,
                f"{request.method} /mcp is not served: this endpoint is stateless and answers POST only.",
                "Problem: the request used another HTTP method. Cause: a stateless MCP server opens no "
                "event stream. Fix: send each JSON-RPC message as POST /mcp.",
                headers={"Allow": "POST"},
            )(scope, receive, send)
            return
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            await _refusal(
                406,
                "POST /mcp needs `Accept: application/json, text/event-stream`.",
                "Problem: the Accept header does not list both media types. Cause: streamable HTTP "
                "clients must accept JSON and event-stream responses. Fix: send "
                "`Accept: application/json, text/event-stream`.",
            )(scope, receive, send)
            return
        presented = bool(request.headers.get("authorization"))
        try:
            caller = await anyio.to_thread.run_sync(self.caller_from_request, request)
        except Exception as exc:
            log.error("authentication failed", extra={"event": "auth_error", "exc_type": type(exc).__name__})
            caller = None
        if caller is None:
            base = public_base_url(request, self.public_url)
            cid = new_correlation_id()
            body = build_envelope(
                unauthorized_error(token_presented=presented),
                tool="",
                arguments={},
                correlation_id=cid,
                transport="http",
            )
            challenge = f'Bearer resource_metadata="{resource_metadata_url(base)}"'
            if presented:
                challenge += ', error="invalid_token"'
            with correlation(cid):
                log.info("unauthorized", extra={"event": "unauthorized", "token_presented": presented})
            await JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})(
                scope, receive, send
            )
            return
        scope[CALLER_SCOPE_KEY] = caller
        await self.app(scope, receive, send)


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
) -> Starlette:
    """A Starlette app serving POST /mcp (both eras), /health and the protected-resource document.

    `invoker` defaults to an `InProcessInvoker` over `deps_factory`. Behind API Gateway, DNS-rebinding
    protection is off (the gateway's Host header is not localhost); locally it is on.
    Build a fresh app per Lambda invocation: the SDK's session manager runs once per app."""
    if invoker is None:
        if deps_factory is None:
            raise ValueError("build_mcp_app needs deps_factory or invoker")
        invoker = InProcessInvoker(deps_factory, surface=surface)
    server = build_mcp_server(invoker, surface=surface)

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "server": SERVER_NAME,
                "version": fleetmem.__version__,
                "protocol_version": PROTOCOL_VERSION,
                "surface": surface,
            }
        )

    async def protected_resource(request: Request) -> Response:
        base = public_base_url(request, public_url)
        return JSONResponse(protected_resource_document(base, authorization_server))

    if behind_gateway:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        security = None  # the SDK turns DNS-rebinding protection on for a localhost bind
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
        custom_starlette_routes=[
            Route("/health", health, methods=["GET"]),
            Route(PRM_PATH, protected_resource, methods=["GET"]),
            Route(PRM_PATH + MCP_PATH, protected_resource, methods=["GET"]),
        ],
    )
    app.add_middleware(_EdgeGuard, caller_from_request=caller_from_request, public_url=public_url)
    return app


# ---------------------------------------------------------------------------------------------
# Who is calling


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def bearer_caller(auth_factory: Callable[[], Auth]) -> CallerFromRequest:
    """Local server: the token is verified through the `Auth` port on every request (the token
    store has no cache), so tokens created or revoked by the CLI while the server runs take effect
    at once."""

    def caller(request: Request) -> Caller | None:
        token = bearer_token(request)
        if token is None:
            return None
        return auth_factory().verify(token)

    return caller


def gateway_caller(request: Request) -> Caller | None:
    """Behind API Gateway: the caller from the authorizer context of the event the edge handler put
    in the ASGI scope as `aws.event` (see `fleetmem.transport.gateway`)."""
    return caller_from_authorizer(request.scope.get("aws.event"))
